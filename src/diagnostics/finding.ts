// What one probe of the broker's surroundings found: a line of `check`, or a warning at start.

export interface Finding {
  /** What was looked at: "database", "identity provider", "MCP server"… */
  readonly check: string;
  readonly ok: boolean;
  /** What was found; when not ok, the cause and the setting to change. */
  readonly detail: string;
}
