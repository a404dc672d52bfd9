/** The rule of the house (DESIGN.md): kernel/ never imports plugins/; a plugin imports kernel/ and generated/ only. */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '..');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return full.endsWith('.ts') ? [full] : [];
  });
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs = [...text.matchAll(/(?:from\s+|import\s*\(\s*)['"]([^'"]+)['"]/g)].map((m) => m[1]!);
  return specs.filter((s) => s.startsWith('.')).map((s) => path.resolve(path.dirname(file), s));
}

describe('architecture', () => {
  it('kernel/ never imports plugins/', () => {
    const offenders = sourceFiles(path.join(root, 'kernel')).flatMap((file) =>
      importsOf(file)
        .filter((target) => target.startsWith(path.join(root, 'plugins') + path.sep))
        .map((target) => `${path.relative(root, file)} -> ${path.relative(root, target)}`),
    );
    expect(offenders).toEqual([]);
  });

  it('a plugin imports kernel/ and generated/ only, never another plugin', () => {
    const pluginsDir = path.join(root, 'plugins');
    const offenders: string[] = [];
    for (const kind of readdirSync(pluginsDir).filter((k) => statSync(path.join(pluginsDir, k)).isDirectory())) {
      for (const plugin of readdirSync(path.join(pluginsDir, kind))) {
        const home = path.join(pluginsDir, kind, plugin);
        for (const file of sourceFiles(home)) {
          for (const target of importsOf(file)) {
            const inside = target.startsWith(home + path.sep);
            const allowed = [path.join(root, 'kernel'), path.join(root, 'generated')].some((d) => target.startsWith(d + path.sep));
            if (!inside && !allowed) offenders.push(`${path.relative(root, file)} -> ${path.relative(root, target)}`);
          }
        }
      }
    }
    expect(offenders).toEqual([]);
  });
});
