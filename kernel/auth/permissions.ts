/** admin ⊃ delete ⊃ write ⊃ read: a key satisfies a route when its strongest permission reaches the route's. */
export type Permission = 'read' | 'write' | 'delete' | 'admin';
export type RoutePermission = Permission | 'none';

export const PERMISSION_LEVELS: readonly Permission[] = ['read', 'write', 'delete', 'admin'];

export function strongestPermission(permissions: readonly Permission[]): Permission | undefined {
  let best = -1;
  for (const p of permissions) best = Math.max(best, PERMISSION_LEVELS.indexOf(p));
  return best < 0 ? undefined : PERMISSION_LEVELS[best];
}

export function satisfies(permissions: readonly Permission[], required: RoutePermission): boolean {
  if (required === 'none') return true;
  const strongest = strongestPermission(permissions);
  return strongest !== undefined && PERMISSION_LEVELS.indexOf(strongest) >= PERMISSION_LEVELS.indexOf(required);
}

/** Every permission the strongest one implies, weakest first. */
export function effectivePermissions(permissions: readonly Permission[]): Permission[] {
  const strongest = strongestPermission(permissions);
  return strongest ? PERMISSION_LEVELS.slice(0, PERMISSION_LEVELS.indexOf(strongest) + 1) : [];
}
