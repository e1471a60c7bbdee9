// A tiny HTML template tag that escapes every interpolated value unless it is marked safe.
// Pages are built only with it, so user-controlled text (client names, URIs) cannot inject markup.

const SAFE = Symbol("safe-html");

export interface SafeHtml {
  readonly [SAFE]: true;
  readonly value: string;
}

export function escapeHtml(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

export function raw(value: string): SafeHtml {
  return { [SAFE]: true, value };
}

function isSafe(v: unknown): v is SafeHtml {
  return typeof v === "object" && v !== null && SAFE in v;
}

type Interpolation = string | number | boolean | null | undefined | SafeHtml | readonly Interpolation[];

function render(v: Interpolation): string {
  if (v === null || v === undefined || v === false) return "";
  if (Array.isArray(v)) return v.map(render).join("");
  if (isSafe(v)) return v.value;
  return escapeHtml(String(v));
}

export function html(strings: TemplateStringsArray, ...values: Interpolation[]): SafeHtml {
  let out = strings[0] ?? "";
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] ?? "");
  });
  return raw(out);
}
