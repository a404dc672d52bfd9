/**
 * The one regular-expression dialect of user patterns (the filter `regex` operator). A pattern is read
 * once, by the parser below, into a small tree; that tree is then written out for each engine that runs
 * it: RE2 in process (linear time, no backtracking) and PostgreSQL's `~` in SQL. Neither engine ever sees
 * the user's text, so they cannot read it two ways: every construct the parser accepts has one meaning,
 * and both emitted patterns spell that meaning with constructs the two engines read identically (explicit
 * code point sets, `(?:…)` groups, greedy quantifiers, `^` and `$`).
 *
 * The dialect is a subset of RE2 syntax (the pattern must also compile as RE2): literals, `.`, `[…]` and
 * `[^…]` with ranges, `\d \w \s \D \W \S` (ASCII sets, as in RE2), `\t \n \r \f \v \xHH \x{H…}`,
 * escaped punctuation, `(…)`, `(?:…)`, `|`, `* + ?`, `{n} {n,} {n,m}` (n, m ≤ 255: PostgreSQL's limit) and their lazy forms (a boolean match does not depend
 * on laziness), `^` and `$` (start and end of the whole text). `.` and negated sets match newlines, as
 * PostgreSQL's `.` does. Everything else is refused with a message naming the construct: back-references
 * and lookaround (no linear-time engine has them), `\p{…}` (PostgreSQL has no Unicode properties), `\b`
 * (a backspace in PostgreSQL), named groups, inline flags, `\A \z \Q…\E`, POSIX `[[:…:]]` classes.
 *
 * Case-insensitive matching is done here, not by either engine's flag (their case folding differs): each
 * literal character, and each character or range inside brackets, also matches the characters that share
 * its simple case mapping (String#toLowerCase/toUpperCase of one code point); `\d \w \s` and their negations
 * are fixed sets. Both engines then match case-sensitively.
 *
 * Cost is bounded in both engines: at most 1,000 characters of pattern and 1,000 positions once counted
 * repetitions are multiplied out, so compiling is cheap, and matching is linear in the text (RE2 by
 * construction; PostgreSQL's engine runs a DFA when there are no back-references and no captures are
 * asked for, which is how `~` runs).
 */
import RE2 from 're2';
import { complement, DIGIT, foldCase, intersect, MAX_CODE_POINT, normalize, SPACE, SURROGATES, UNIVERSE, WORD, type CodeSet } from './code-points.js';

export const MAX_PATTERN_LENGTH = 1000;
const MAX_POSITIONS = 1000;
const MAX_REPEAT = 255;
/**
 * Optional parts (quantifiers that may repeat a varying number of times, empty alternatives) once counted
 * repetitions are multiplied out. PostgreSQL's regex compiler is far worse than linear in them: measured on
 * PGlite, `(.?.?.?){0,250}q` (750) took 10.7 s to compile and `.?` written out 499 times 0.47 s, while
 * `a{0,255}b{0,255}` (two parts) takes 2 ms. At 100, the costliest shapes take ~20 ms once (compiled
 * patterns are cached).
 */
const MAX_OPTIONAL_PARTS = 100;

/** A pattern the dialect does not accept; the message names the construct. */
export class UnsupportedPatternError extends Error {}

/** A checked user pattern, ready for each engine. */
export interface UserRegex {
  readonly pattern: string;
  readonly caseSensitive: boolean;
  /** True when the pattern matches somewhere in `text` (RE2, linear time). */
  test(text: string): boolean;
  /** The same pattern for PostgreSQL's case-sensitive `~` operator. */
  readonly postgres: string;
}

type Node =
  | { kind: 'set'; set: CodeSet }
  | { kind: 'start' }
  | { kind: 'end' }
  | { kind: 'concat'; items: Node[] }
  | { kind: 'alternate'; items: Node[] }
  | { kind: 'repeat'; item: Node; min: number; max: number | null };

export function compileUserRegex(pattern: string, caseSensitive: boolean): UserRegex {
  if (pattern.length > MAX_PATTERN_LENGTH) {
    throw new UnsupportedPatternError(`is longer than ${MAX_PATTERN_LENGTH} characters`);
  }
  // Our parser first, so a construct outside the dialect is named; then RE2 on the user's own text, so
  // the dialect stays a subset of RE2 syntax whatever the parser lets through.
  const tree = new Parser(pattern, caseSensitive).parse();
  try {
    new RE2(pattern, 'u');
  } catch (err) {
    throw new UnsupportedPatternError(`is not a valid regular expression: ${(err as Error).message}`);
  }
  const positions = weight(tree);
  if (positions > MAX_POSITIONS) {
    throw new UnsupportedPatternError(`is too large: ${positions} positions once counted repetitions are expanded (at most ${MAX_POSITIONS})`);
  }
  const optional = optionalParts(tree);
  if (optional > MAX_OPTIONAL_PARTS) {
    throw new UnsupportedPatternError(
      `has too many optional parts: ${optional} once counted repetitions are expanded (at most ${MAX_OPTIONAL_PARTS}; ` +
        'a quantifier or an empty alternative inside a repeated group counts once per repetition): ' +
        'quantify single characters or sets (a{0,255} is one part) rather than groups that hold quantifiers',
    );
  }
  const re2 = new RE2(emit(tree, re2Syntax), 'u');
  return { pattern, caseSensitive, postgres: emit(tree, postgresSyntax), test: (text) => re2.test(text) };
}

// ---------------------------------------------------------------------------------------------------
// Parser

const code = (char: string) => char.codePointAt(0)!;
const isHex = (cp: number | undefined) => cp !== undefined && /^[0-9A-Fa-f]$/.test(String.fromCodePoint(cp));
const isDigit = (cp: number | undefined) => cp !== undefined && cp >= 0x30 && cp <= 0x39;
/** ASCII punctuation: what a backslash makes literal. */
const isPunctuation = (cp: number) => cp < 0x80 && /[!-/:-@[-`{-~]/.test(String.fromCodePoint(cp));

const SIMPLE_QUANTIFIERS: Record<string, { min: number; max: number | null }> = {
  '*': { min: 0, max: null },
  '+': { min: 1, max: null },
  '?': { min: 0, max: 1 },
};

/** Escapes naming a character, in and out of brackets. */
const CHARACTER_ESCAPES: Record<string, number> = { t: 0x09, n: 0x0a, v: 0x0b, f: 0x0c, r: 0x0d };
const CLASS_ESCAPES: Record<string, () => CodeSet> = {
  d: () => DIGIT,
  w: () => WORD,
  s: () => SPACE,
  D: () => complement(DIGIT),
  W: () => complement(WORD),
  S: () => complement(SPACE),
};

class Parser {
  private readonly cps: number[];
  private i = 0;

  constructor(
    pattern: string,
    private readonly caseSensitive: boolean,
  ) {
    this.cps = Array.from(pattern, code);
  }

  parse(): Node {
    const tree = this.alternation();
    if (this.i < this.cps.length) this.fail('has an unmatched )');
    return tree;
  }

  private peek(offset = 0): number | undefined {
    return this.cps[this.i + offset];
  }

  private is(char: string, offset = 0): boolean {
    return this.peek(offset) === code(char);
  }

  private fail(msg: string): never {
    throw new UnsupportedPatternError(msg);
  }

  private alternation(): Node {
    const items = [this.concatenation()];
    while (this.is('|')) {
      this.i++;
      items.push(this.concatenation());
    }
    return items.length === 1 ? items[0]! : { kind: 'alternate', items };
  }

  private concatenation(): Node {
    const items: Node[] = [];
    while (this.i < this.cps.length && !this.is('|') && !this.is(')')) items.push(this.repetition());
    return items.length === 1 ? items[0]! : { kind: 'concat', items };
  }

  private repetition(): Node {
    const item = this.atom();
    const bounds = this.quantifier();
    if (!bounds) return item;
    if (item.kind === 'start' || item.kind === 'end') this.fail('has a quantifier after ^ or $');
    if (this.is('?')) this.i++; // lazy: the same match or no match, as far as a yes/no test goes
    if (this.quantifierAhead()) this.fail('has two quantifiers in a row (like a**): group the first one');
    return { kind: 'repeat', item, ...bounds };
  }

  private quantifierAhead(): boolean {
    return this.is('*') || this.is('+') || this.is('?') || (this.is('{') && this.bracesAhead() !== undefined);
  }

  private quantifier(): { min: number; max: number | null } | undefined {
    const simple = SIMPLE_QUANTIFIERS[String.fromCodePoint(this.peek() ?? 0)];
    if (simple) {
      this.i++;
      return simple;
    }
    if (this.is('{')) {
      const braces = this.bracesAhead();
      if (!braces) this.fail('has a { that does not start a counted repetition: write a literal { as \\{');
      this.i = braces.next;
      if (braces.min > MAX_REPEAT || (braces.max ?? 0) > MAX_REPEAT) {
        this.fail(`has a counted repetition above ${MAX_REPEAT} (the database engine's limit)`);
      }
      return { min: braces.min, max: braces.max };
    }
    return undefined;
  }

  /** `{n}`, `{n,}` or `{n,m}` at the cursor, without consuming it. */
  private bracesAhead(): { min: number; max: number | null; next: number } | undefined {
    let j = this.i + 1;
    const number = (): number | undefined => {
      const start = j;
      while (isDigit(this.cps[j])) j++;
      return j > start ? Number(String.fromCodePoint(...this.cps.slice(start, j))) : undefined;
    };
    const min = number();
    if (min === undefined) return undefined;
    let max: number | null = min;
    if (this.cps[j] === code(',')) {
      j++;
      max = number() ?? null;
    }
    if (this.cps[j] !== code('}')) return undefined;
    return { min, max, next: j + 1 };
  }

  private atom(): Node {
    const cp = this.peek()!;
    const char = String.fromCodePoint(cp);
    switch (char) {
      case '(':
        return this.group();
      case '[':
        return this.bracket();
      case '.':
        this.i++;
        return { kind: 'set', set: UNIVERSE };
      case '^':
        this.i++;
        return { kind: 'start' };
      case '$':
        this.i++;
        return { kind: 'end' };
      case '\\':
        return this.escape();
      case '*':
      case '+':
      case '?':
        return this.fail(`has a quantifier ${char} with nothing before it`);
      case '{':
        if (this.bracesAhead()) this.fail('has a counted repetition with nothing before it');
        return this.fail('has a { that does not start a counted repetition: write a literal { as \\{');
      default:
        this.i++;
        return this.literal(cp);
    }
  }

  private literal(cp: number): Node {
    const set: CodeSet = [[cp, cp]];
    return { kind: 'set', set: this.caseSensitive ? set : foldCase(set) };
  }

  private group(): Node {
    this.i++;
    if (this.is('?')) {
      if (this.is(':', 1)) {
        this.i += 2;
      } else if (this.is('=', 1) || this.is('!', 1)) {
        this.fail('has a lookahead (?=…) or (?!…): lookaround is not supported');
      } else if (this.is('<', 1) && (this.is('=', 2) || this.is('!', 2))) {
        this.fail('has a lookbehind (?<=…) or (?<!…): lookaround is not supported');
      } else if (this.is('P', 1) || this.is('<', 1)) {
        this.fail('has a named group (?P<name>…): use (…) or (?:…)');
      } else if (this.is('>', 1)) {
        this.fail('has an atomic group (?>…): not supported');
      } else {
        this.fail('has inline flags like (?i): use the filter\'s case_sensitive instead');
      }
    }
    const inner = this.alternation();
    if (!this.is(')')) this.fail('has a ( without its )');
    this.i++;
    return inner;
  }

  /** A backslash sequence outside brackets. */
  private escape(): Node {
    const set = this.escapedSet(false);
    return set.literal !== undefined ? this.literal(set.literal) : { kind: 'set', set: set.set };
  }

  /**
   * The escape at the cursor (a backslash): one character (`literal`), or a fixed class (`set`). Anything
   * outside the dialect is refused here, by name.
   */
  private escapedSet(inBrackets: boolean): { literal: number; set?: undefined } | { literal?: undefined; set: CodeSet } {
    this.i++;
    const cp = this.peek();
    if (cp === undefined) this.fail('ends with a lone backslash');
    const char = String.fromCodePoint(cp);
    this.i++;
    if (char in CHARACTER_ESCAPES) return { literal: CHARACTER_ESCAPES[char]! };
    if (char in CLASS_ESCAPES) return { set: CLASS_ESCAPES[char]!() };
    if (char === 'x') return { literal: this.hexEscape() };
    if (isPunctuation(cp)) return { literal: cp };
    if (isDigit(cp) && cp !== code('0')) this.fail(`has a back-reference \\${char}: back-references are not supported (no linear-time engine has them)`);
    switch (char) {
      case 'k':
        return this.fail('has a named back-reference \\k<…>: back-references are not supported (no linear-time engine has them)');
      case '0':
        return this.fail('has an octal escape \\0: use \\x{…}');
      case 'p':
      case 'P':
        return this.fail(`has a Unicode class \\${char}{…}: not supported by the database engine; list the ranges, like [a-zà-ÿ]`);
      case 'b':
      case 'B':
        return this.fail(inBrackets ? 'has \\b inside brackets: use \\x{8} for a backspace' : `has a word boundary \\${char}: not supported`);
      case 'A':
      case 'z':
      case 'Z':
        return this.fail(`has \\${char}: use ^ for the start and $ for the end of the text`);
      case 'Q':
      case 'E':
        return this.fail('has \\Q…\\E quoting: escape each special character with a backslash');
      case 'C':
        return this.fail('has \\C: use . for any character');
      default:
        return this.fail(`has an unsupported escape \\${char}`);
    }
  }

  private hexEscape(): number {
    let digits = '';
    if (this.is('{')) {
      this.i++;
      while (isHex(this.peek())) digits += String.fromCodePoint(this.cps[this.i++]!);
      if (!this.is('}') || digits.length === 0) this.fail('has a malformed \\x{…} escape');
      this.i++;
    } else {
      for (let k = 0; k < 2; k++) {
        if (!isHex(this.peek())) this.fail('has a malformed \\xHH escape (two hex digits)');
        digits += String.fromCodePoint(this.cps[this.i++]!);
      }
    }
    const value = parseInt(digits, 16);
    if (value > MAX_CODE_POINT || digits.length > 8) this.fail('has a \\x escape beyond U+10FFFF');
    if (value === 0 || (value >= SURROGATES[0] && value <= SURROGATES[1])) this.fail('has a \\x escape of a character no text can hold');
    return value;
  }

  /** `[…]` or `[^…]`. */
  private bracket(): Node {
    this.i++;
    let negated = false;
    if (this.is('^')) {
      negated = true;
      this.i++;
    }
    const ranges: CodeSet = [];
    const fixed: CodeSet = [];
    let first = true;
    for (;;) {
      const cp = this.peek();
      if (cp === undefined) this.fail('has a [ without its ]');
      if (cp === code(']') && !first) break;
      first = false;
      if (cp === code('[') && this.is(':', 1)) this.fail('has a POSIX class [[:…:]]: use an explicit set like [a-z] or \\d');
      const low = this.bracketItem();
      if (low.set) {
        fixed.push(...low.set);
        continue;
      }
      if (this.is('-') && this.peek(1) !== undefined && !this.is(']', 1)) {
        this.i++;
        const high = this.bracketItem();
        if (high.set) this.fail('has a range ending in a class like \\d');
        if (high.literal < low.literal) this.fail('has a range whose end comes before its start');
        ranges.push([low.literal, high.literal]);
      } else {
        ranges.push([low.literal, low.literal]);
      }
    }
    this.i++;
    const characters = normalize(ranges);
    let set = normalize([...(this.caseSensitive ? characters : foldCase(characters)), ...fixed]);
    set = negated ? complement(set) : intersect(set, UNIVERSE);
    if (set.length === 0) this.fail('has a bracket expression that matches no character');
    return { kind: 'set', set };
  }

  private bracketItem(): { literal: number; set?: undefined } | { literal?: undefined; set: CodeSet } {
    const cp = this.peek()!;
    if (cp === code('\\')) return this.escapedSet(true);
    this.i++;
    return { literal: cp };
  }
}

/** Positions once counted repetitions are multiplied out: a bound on the size of both engines' automata. */
function weight(node: Node): number {
  switch (node.kind) {
    case 'set':
    case 'start':
    case 'end':
      return 1;
    case 'concat':
    case 'alternate':
      return node.items.reduce((sum, item) => sum + weight(item), 0);
    case 'repeat':
      return weight(node.item) * Math.max(1, node.max ?? node.min + 1);
  }
}

/**
 * Quantifiers with a range and empty alternatives, counted once per copy their enclosing repetitions make.
 * A range is one part where nothing repeats it (PostgreSQL compiles `a{0,255}` cheaply), and one part per
 * optional position inside a repeated group (`(.{0,3}){99}` costs as much as 297 `.?`).
 */
function optionalParts(node: Node, copied = false): number {
  switch (node.kind) {
    case 'set':
    case 'start':
    case 'end':
      return 0;
    case 'concat':
      return node.items.reduce((sum, item) => sum + optionalParts(item, copied), 0);
    case 'alternate':
      return node.items.reduce((sum, item) => sum + optionalParts(item, copied), node.items.some(isEmpty) ? 1 : 0);
    case 'repeat': {
      const copies = Math.max(1, node.max ?? node.min + 1);
      const range = node.max === null ? 1 : node.max - node.min;
      const own = range === 0 ? 0 : copied ? range : 1;
      return optionalParts(node.item, copied || copies > 1) * copies + own;
    }
  }
}

const isEmpty = (node: Node) => node.kind === 'concat' && node.items.length === 0;

// ---------------------------------------------------------------------------------------------------
// Emitters

interface Syntax {
  /** One code point, written so that it means itself inside and outside brackets. */
  char(cp: number): string;
}

const plain = (cp: number) => (cp >= 0x30 && cp <= 0x39) || (cp >= 0x41 && cp <= 0x5a) || (cp >= 0x61 && cp <= 0x7a);
const hex = (cp: number, width: number) => cp.toString(16).toUpperCase().padStart(width, '0');

const re2Syntax: Syntax = { char: (cp) => (plain(cp) ? String.fromCodePoint(cp) : `\\x{${hex(cp, 1)}}`) };
/** PostgreSQL ARE character-entry escapes: `\uXXXX` (exactly four digits) and `\UXXXXXXXX` (eight). */
const postgresSyntax: Syntax = {
  char: (cp) => (plain(cp) ? String.fromCodePoint(cp) : cp <= 0xffff ? `\\u${hex(cp, 4)}` : `\\U${hex(cp, 8)}`),
};

function emit(node: Node, syntax: Syntax): string {
  switch (node.kind) {
    case 'set': {
      const [only] = node.set;
      if (node.set.length === 1 && only![0] === only![1]) return syntax.char(only![0]);
      const parts = node.set.map(([lo, hi]) => (lo === hi ? syntax.char(lo) : `${syntax.char(lo)}-${syntax.char(hi)}`));
      return `[${parts.join('')}]`;
    }
    case 'start':
      return '^';
    case 'end':
      return '$';
    case 'concat':
      return node.items.map((item) => (item.kind === 'alternate' ? `(?:${emit(item, syntax)})` : emit(item, syntax))).join('');
    case 'alternate':
      return node.items.map((item) => emit(item, syntax)).join('|');
    case 'repeat': {
      const inner = emit(node.item, syntax);
      const atom = node.item.kind === 'set' ? inner : `(?:${inner})`;
      const { min, max } = node;
      const suffix =
        max === null ? (min === 0 ? '*' : min === 1 ? '+' : `{${min},}`) : min === 0 && max === 1 ? '?' : min === max ? `{${min}}` : `{${min},${max}}`;
      return atom + suffix;
    }
  }
}
