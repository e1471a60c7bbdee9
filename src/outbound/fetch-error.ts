// What an outbound fetch of this folder fails with when it refuses or cannot get an answer.

/** Why a document could not be fetched, in words safe to show to the person at the browser. */
export class OutboundFetchError extends Error {
  constructor(
    readonly kind: "refused-address" | "not-https" | "redirect" | "status" | "too-large" | "not-json" | "timeout" | "network",
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "OutboundFetchError";
  }
}
