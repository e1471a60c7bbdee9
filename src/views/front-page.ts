// The front door (GET /): what this service is, the MCP URL to paste into a client, which sign-in
// it uses, and where a user sees and revokes their connected apps. No script (the CSP allows
// none): the URL is selected as a whole by one click (user-select: all) for copying.
import { html } from "./html.ts";
import { page } from "./layout.ts";

export interface FrontPageInput {
  /** RESOURCE_NAME. */
  readonly resourceName: string;
  /** PUBLIC_URL/mcp: what a user adds to their MCP client. */
  readonly mcpUrl: string;
  /** The upstream IdP's display name ("GitHub", "Google", …). */
  readonly providerName: string;
  /** PUBLIC_URL/account: the connected-apps page. */
  readonly accountUrl: string;
  readonly demoMode: boolean;
  /**
   * The servers of a catalogue of several, each with its URL to paste. (Their names and URLs are
   * no secret: each one's protected resource metadata is public, as RFC 9728 wants.)
   */
  readonly servers?: readonly { readonly title: string; readonly description: string | undefined; readonly url: string }[];
}

export function renderFrontPage(input: FrontPageInput): string {
  if (input.servers && input.servers.length > 1) return renderCatalogue(input, input.servers);
  return page(
    input.resourceName,
    html`<h1 id="resource-name">${input.resourceName}</h1>
<p>An MCP server. To use it from an AI application (Claude, Cursor, VS Code and others), add this server URL there:</p>
<code class="copy" id="mcp-url">${input.mcpUrl}</code>
<p>The application then opens a page here: you allow it, and sign in with <strong id="provider-name">${input.providerName}</strong>.</p>
${input.demoMode ? html`<p class="warning" id="demo-mode">Demo mode: anyone can sign in with any name. Configure an identity provider before real use.</p>` : ""}
<div class="actions">
<a class="button" id="account-link" href="${input.accountUrl}">Your connected apps</a>
</div>
<p class="muted">There you see which applications can use ${input.resourceName} as you, and revoke them.</p>`,
  );
}

function renderCatalogue(input: FrontPageInput, servers: NonNullable<FrontPageInput["servers"]>): string {
  return page(
    input.resourceName,
    html`<h1 id="resource-name">${input.resourceName}</h1>
<p>MCP servers. To use one from an AI application (Claude, Cursor, VS Code and others), add its URL there:</p>
<ul class="servers" id="servers">
${servers.map((s) => html`<li><strong>${s.title}</strong>${s.description ? html` <span class="muted">${s.description}</span>` : ""}<br><code class="copy">${s.url}</code></li>`)}
</ul>
<p>The application then opens a page here: you allow it, and sign in with <strong id="provider-name">${input.providerName}</strong>. Each server asks on its own.</p>
${input.demoMode ? html`<p class="warning" id="demo-mode">Demo mode: anyone can sign in with any name. Configure an identity provider before real use.</p>` : ""}
<div class="actions">
<a class="button" id="account-link" href="${input.accountUrl}">Your connected apps</a>
</div>
<p class="muted">There you see which applications can use these servers as you, and revoke them.</p>`,
  );
}

/** The icon's size in pixels, and the samples per pixel along each axis (smooth edges). */
const ICON_SIZE = 32;
const SUPERSAMPLE = 4;
const ICON_BLUE = [0x24, 0x57, 0xd6] as const;

/** Inside the icon's rounded square (corner radius 7 px)? */
function inTile(x: number, y: number): boolean {
  const r = 7;
  const dx = Math.max(r - x, 0, x - (ICON_SIZE - r));
  const dy = Math.max(r - y, 0, y - (ICON_SIZE - r));
  return dx * dx + dy * dy <= r * r;
}

/** Inside the white keyhole: a circle over a flared stem. */
function inKeyhole(x: number, y: number): boolean {
  if ((x - 16) ** 2 + (y - 12.5) ** 2 <= 5 * 5) return true;
  if (y < 12.5 || y > 24.5) return false;
  const halfWidth = 2 + ((y - 12.5) / 12) * 1.8;
  return Math.abs(x - 16) <= halfWidth;
}

let drawnIcon: Buffer | undefined;

/**
 * /favicon.ico, drawn once per process when first asked for: ~16,000 samples, about 100 ms of
 * cold code, which every broker start paid before.
 */
export function faviconIco(): Buffer {
  drawnIcon ??= drawFaviconIco();
  return drawnIcon;
}

/**
 * Drawn in code (no binary asset in the repository): one 32×32 32-bit image in an ICO container
 * (ICONDIR, one ICONDIRENTRY, a BITMAPINFOHEADER, bottom-up BGRA rows, and the all-zero AND mask
 * that 32-bit icons still carry: the alpha channel decides).
 */
function drawFaviconIco(): Buffer {
  const pixelBytes = ICON_SIZE * ICON_SIZE * 4;
  const maskBytes = ICON_SIZE * 4; // one bit per pixel, rows padded to 4 bytes
  const imageBytes = 40 + pixelBytes + maskBytes;
  const out = Buffer.alloc(6 + 16 + imageBytes);
  out.writeUInt16LE(0, 0);
  out.writeUInt16LE(1, 2); // an icon
  out.writeUInt16LE(1, 4); // one image
  out.writeUInt8(ICON_SIZE, 6);
  out.writeUInt8(ICON_SIZE, 7);
  out.writeUInt16LE(1, 10); // planes
  out.writeUInt16LE(32, 12); // bits per pixel
  out.writeUInt32LE(imageBytes, 14);
  out.writeUInt32LE(22, 18); // where the image starts
  const header = 22;
  out.writeUInt32LE(40, header);
  out.writeInt32LE(ICON_SIZE, header + 4);
  out.writeInt32LE(ICON_SIZE * 2, header + 8); // colour rows and mask rows
  out.writeUInt16LE(1, header + 12);
  out.writeUInt16LE(32, header + 14);
  out.writeUInt32LE(pixelBytes + maskBytes, header + 20);
  const samples = SUPERSAMPLE * SUPERSAMPLE;
  for (let row = 0; row < ICON_SIZE; row++) {
    for (let col = 0; col < ICON_SIZE; col++) {
      let tile = 0;
      let hole = 0;
      for (let i = 0; i < samples; i++) {
        const x = col + ((i % SUPERSAMPLE) + 0.5) / SUPERSAMPLE;
        const y = row + (Math.floor(i / SUPERSAMPLE) + 0.5) / SUPERSAMPLE;
        if (!inTile(x, y)) continue;
        tile++;
        if (inKeyhole(x, y)) hole++;
      }
      // Bottom-up rows: the first row in the file is the bottom of the picture.
      const at = header + 40 + ((ICON_SIZE - 1 - row) * ICON_SIZE + col) * 4;
      const mix = (channel: number) => (tile ? Math.round((hole * 255 + (tile - hole) * channel) / tile) : 0);
      out.writeUInt8(mix(ICON_BLUE[2]), at);
      out.writeUInt8(mix(ICON_BLUE[1]), at + 1);
      out.writeUInt8(mix(ICON_BLUE[0]), at + 2);
      out.writeUInt8(Math.round((tile / samples) * 255), at + 3);
    }
  }
  return out;
}
