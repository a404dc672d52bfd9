#!/usr/bin/env node
// Runs the TypeScript entry point directly (tsx), so `npm install` is all a machine needs.
import { register } from 'tsx/esm/api';

register();
await import('../kernel/cli.ts');
