// The page frame shared by every browser page: self-contained CSS (no external assets), readable
// on a phone, light and dark. The CSS is a constant: it goes in raw (escaping it would turn its
// quotes into entities, which <style> does not decode, and break the rules that use them).
import { html, raw, type SafeHtml } from "./html.ts";

const CSS = `
:root{color-scheme:light dark;--bg:#f6f7f9;--card:#fff;--text:#1c2330;--muted:#5b6578;--border:#dde1e8;--accent:#2457d6;--accent-text:#fff;--danger:#b42318;--warn-bg:#fff4e5;--warn-text:#7a4100}
@media (prefers-color-scheme:dark){:root{--bg:#0f1319;--card:#181d26;--text:#e6e9ef;--muted:#9aa4b5;--border:#2b3340;--accent:#5b8cff;--accent-text:#0b0e13;--danger:#ff6b5e;--warn-bg:#3a2a10;--warn-text:#ffd08a}}
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--text);display:flex;min-height:100vh;align-items:center;justify-content:center;padding:16px}
main{background:var(--card);border:1px solid var(--border);border-radius:14px;max-width:480px;width:100%;padding:28px;box-shadow:0 4px 24px rgba(0,0,0,.06)}
h1{font-size:1.35rem;margin:0 0 8px;line-height:1.3}
p{margin:8px 0}
.muted{color:var(--muted);font-size:.92rem}
.brand{font-size:.8rem;letter-spacing:.06em;text-transform:uppercase;color:var(--muted);margin-bottom:16px}
.client{display:flex;gap:14px;align-items:center;margin:8px 0 16px}
.client img{width:48px;height:48px;border-radius:10px;border:1px solid var(--border);object-fit:contain}
.return-to{margin:4px 0 0;color:var(--text)}
.warning{background:var(--warn-bg);color:var(--warn-text);border-radius:10px;padding:10px 12px}
.warning .badge{background:var(--card)}
.error-text{color:var(--danger);font-weight:600}
.badge{display:inline-block;font-size:.78rem;padding:2px 8px;border-radius:999px;background:var(--warn-bg);color:var(--warn-text);font-weight:600}
dl{display:grid;grid-template-columns:max-content 1fr;gap:6px 14px;margin:16px 0;font-size:.92rem}
dt{color:var(--muted)}dd{margin:0;word-break:break-all}
ul.scopes{margin:8px 0;padding-left:20px}
.actions{display:flex;gap:12px;margin-top:22px;flex-wrap:wrap}
button,a.button{flex:1;min-width:120px;font:inherit;font-weight:600;padding:11px 16px;border-radius:10px;border:1px solid var(--border);background:transparent;color:var(--text);cursor:pointer;text-align:center;text-decoration:none}
button.primary,a.button.primary{background:var(--accent);border-color:var(--accent);color:var(--accent-text)}
button:focus-visible,a.button:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.error h1{color:var(--danger)}
@media (max-width:480px){body{align-items:flex-start;padding:12px}main{padding:20px;border-radius:12px}dl{grid-template-columns:1fr;gap:0}dt{margin-top:8px}}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.88em}
.avatar{flex:none;width:48px;height:48px;border-radius:50%;display:flex;align-items:center;justify-content:center;font-size:1.4rem;font-weight:700;color:#fff;background:#5b6578;user-select:none}
.avatar.c0{background:#2457d6}.avatar.c1{background:#0f7b6c}.avatar.c2{background:#8a3ffc}.avatar.c3{background:#b42318}
.avatar.c4{background:#a15c00}.avatar.c5{background:#00739d}.avatar.c6{background:#c2185b}.avatar.c7{background:#4d7c0f}
.signed-in{margin:14px 0 0;padding:10px 12px;border:1px solid var(--border);border-radius:10px}
button.link{flex:none;min-width:0;padding:0;border:0;background:none;color:var(--accent);font-weight:600;text-decoration:underline;text-align:left}
.question{margin:18px 0 0;font-weight:600}
.copy{display:block;margin:8px 0;padding:10px 12px;border:1px solid var(--border);border-radius:10px;background:var(--bg);font-size:.95rem;word-break:break-all;user-select:all}
a{color:var(--accent)}
.app{border-top:1px solid var(--border);margin-top:18px;padding-top:14px}
.app h2{font-size:1.05rem;margin:0;line-height:1.35;overflow-wrap:anywhere}
.app dl{margin:10px 0}
.app .actions{margin-top:10px}
.verified{font-weight:600}
.notice{border:1px solid var(--border);border-left:4px solid var(--accent);border-radius:10px;padding:10px 12px}
button.danger{color:var(--danger);border-color:var(--danger)}
`;

export function page(title: string, body: SafeHtml, options: { className?: string } = {}): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${title}</title>
<style>${raw(CSS)}</style>
</head>
<body>
<main class="${options.className ?? ""}">
<div class="brand">MCP Auth Broker</div>
${body}
</main>
</body>
</html>`.value;
}
