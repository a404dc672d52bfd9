/**
 * Content types come from the bytes, never from the client: magic numbers first (file-type), then
 * "is it text?", refined by the client's hint only between text flavours (JSON, CSV, markdown, ...).
 */
import { fileTypeFromBuffer } from 'file-type';

export const SNIFF_BYTES = 4100;

function looksLikeText(head: Buffer): boolean {
  if (head.includes(0)) return false;
  const text = new TextDecoder('utf-8', { fatal: false }).decode(head);
  // A cut multi-byte character at the end of the sample is fine; replacement characters elsewhere are not.
  const replacements = (text.slice(0, -4).match(/\uFFFD/g) ?? []).length;
  return replacements === 0;
}

const TEXT_HINTS: Record<string, string> = {
  json: 'application/json',
  csv: 'text/csv',
  md: 'text/markdown',
  html: 'text/html',
  htm: 'text/html',
  xml: 'text/xml',
  txt: 'text/plain',
};

export interface SniffHints {
  declaredType?: string | undefined;
  filename?: string | undefined;
  /** The whole content, when it is small enough to have it (lets JSON be checked for real). */
  whole?: Buffer;
}

export async function sniffContentType(head: Buffer, hints: SniffHints = {}): Promise<string> {
  const detected = await fileTypeFromBuffer(head);
  if (detected) return detected.mime;
  if (head.length === 0 || !looksLikeText(head)) return 'application/octet-stream';
  if (hints.whole) {
    try {
      JSON.parse(hints.whole.toString('utf8'));
      const trimmed = hints.whole.toString('utf8').trim();
      if (trimmed.startsWith('{') || trimmed.startsWith('[')) return 'application/json';
    } catch {
      // not JSON: some other text
    }
  }
  const declared = hints.declaredType?.split(';')[0]?.trim().toLowerCase();
  if (declared && (declared.startsWith('text/') || declared === 'application/json') && !hints.whole) return declared;
  const extension = hints.filename?.split('.').pop()?.toLowerCase();
  if (extension && TEXT_HINTS[extension] && !(hints.whole && TEXT_HINTS[extension] === 'application/json')) return TEXT_HINTS[extension]!;
  return 'text/plain';
}
