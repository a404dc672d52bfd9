/**
 * The key that signs presigned URLs. Configured (TESSERA_SIGNING_SECRET, required when several API
 * processes serve one blob store), or generated once and kept in the data folder so URLs survive restarts.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from './config.js';

export async function signingSecret(config: Pick<Config, 'signingSecret' | 'home'>): Promise<Buffer> {
  if (config.signingSecret) return Buffer.from(config.signingSecret, 'utf8');
  const file = path.join(config.home, 'secrets', 'signing-key');
  try {
    return Buffer.from((await readFile(file, 'utf8')).trim(), 'base64');
  } catch {
    const secret = randomBytes(32);
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    // 'wx': if another process created it meanwhile, use theirs.
    await writeFile(file, secret.toString('base64'), { mode: 0o600, flag: 'wx' }).catch(async () => undefined);
    return Buffer.from((await readFile(file, 'utf8')).trim(), 'base64');
  }
}
