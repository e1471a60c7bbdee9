// Domain outcomes of validating a broker credential, independent of the endpoint that reports
// them: the gateway answers 401 invalid_token / 503, the token endpoint invalid_grant / 503.

/** The credential or the grant (or the upstream session behind it) is dead. */
export class CredentialRejected extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = "CredentialRejected";
  }
}

/** The upstream IdP could not be asked in time: fail closed, the client should retry. */
export class UpstreamUnavailable extends Error {
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds = 5) {
    super(message);
    this.name = "UpstreamUnavailable";
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
