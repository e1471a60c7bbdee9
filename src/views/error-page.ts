import { html } from "./html.ts";
import { page } from "./layout.ts";

export function renderErrorPage(input: { title: string; detail: string; hint?: string | undefined; requestId?: string | undefined }): string {
  return page(
    input.title,
    html`<h1>${input.title}</h1>
<p>${input.detail}</p>
${input.hint ? html`<p class="muted">${input.hint}</p>` : ""}
${input.requestId ? html`<p class="muted">Reference: <code>${input.requestId}</code></p>` : ""}`,
    { className: "error" },
  );
}
