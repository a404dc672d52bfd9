/**
 * Duplicate keys in one JSON text. JSON.parse keeps the last of two equal keys silently, so a log line
 * like {"msg":"a",...,"msg":"b"} parses; log collectors then disagree on which one they keep. This walks
 * the raw text instead and reports every key an object repeats, as `path.key`.
 */
export function duplicateKeys(text: string): string[] {
  let at = 0;
  const duplicates: string[] = [];
  const skipSpace = () => {
    while (at < text.length && ' \t\r\n'.includes(text[at]!)) at++;
  };
  const readString = (): string => {
    const start = at;
    at++; // opening quote
    while (text[at] !== '"') {
      if (at >= text.length) throw new SyntaxError(`unterminated string at ${start}`);
      at += text[at] === '\\' ? 2 : 1;
    }
    at++;
    return JSON.parse(text.slice(start, at)) as string;
  };
  const readValue = (path: string): void => {
    skipSpace();
    const c = text[at];
    if (c === '{') {
      at++;
      const seen = new Set<string>();
      skipSpace();
      if (text[at] === '}') return void at++;
      for (;;) {
        skipSpace();
        const key = readString();
        if (seen.has(key)) duplicates.push(path ? `${path}.${key}` : key);
        seen.add(key);
        skipSpace();
        if (text[at++] !== ':') throw new SyntaxError(`expected ':' at ${at - 1}`);
        readValue(path ? `${path}.${key}` : key);
        skipSpace();
        const next = text[at++];
        if (next === '}') return;
        if (next !== ',') throw new SyntaxError(`expected ',' or '}' at ${at - 1}`);
      }
    }
    if (c === '[') {
      at++;
      skipSpace();
      if (text[at] === ']') return void at++;
      for (let i = 0; ; i++) {
        readValue(`${path}[${i}]`);
        skipSpace();
        const next = text[at++];
        if (next === ']') return;
        if (next !== ',') throw new SyntaxError(`expected ',' or ']' at ${at - 1}`);
      }
    }
    if (c === '"') return void readString();
    const literal = /^(?:true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(text.slice(at));
    if (!literal) throw new SyntaxError(`unexpected '${c}' at ${at}`);
    at += literal[0].length;
  };
  readValue('');
  skipSpace();
  if (at !== text.length) throw new SyntaxError(`trailing text at ${at}`);
  return duplicates;
}
