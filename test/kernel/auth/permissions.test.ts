import { describe, expect, it } from 'vitest';
import {
  PERMISSION_LEVELS,
  effectivePermissions,
  satisfies,
  strongestPermission,
  type Permission,
  type RoutePermission,
} from '../../../kernel/auth/permissions.js';

describe('permission hierarchy', () => {
  it('orders the levels read < write < delete < admin', () => {
    expect(PERMISSION_LEVELS).toEqual(['read', 'write', 'delete', 'admin']);
  });

  it('finds the strongest permission whatever the order', () => {
    expect(strongestPermission(['read'])).toBe('read');
    expect(strongestPermission(['write', 'read'])).toBe('write');
    expect(strongestPermission(['read', 'delete', 'write'])).toBe('delete');
    expect(strongestPermission(['admin', 'read'])).toBe('admin');
    expect(strongestPermission([])).toBeUndefined();
  });

  describe('satisfies', () => {
    const routes: RoutePermission[] = ['read', 'write', 'delete', 'admin'];
    const single: Permission[] = ['read', 'write', 'delete', 'admin'];

    for (const held of single) {
      for (const required of routes) {
        const expected = PERMISSION_LEVELS.indexOf(held) >= PERMISSION_LEVELS.indexOf(required as Permission);
        it(`a key with only '${held}' ${expected ? 'satisfies' : 'does not satisfy'} a '${required}' route`, () => {
          expect(satisfies([held], required)).toBe(expected);
        });
      }
    }

    it('uses the strongest permission of a list, not the first', () => {
      expect(satisfies(['read', 'admin'], 'delete')).toBe(true);
      expect(satisfies(['read', 'write'], 'delete')).toBe(false);
      expect(satisfies(['write', 'read'], 'write')).toBe(true);
    });

    it("lets any key, even one without permissions, through a 'none' route", () => {
      expect(satisfies([], 'none')).toBe(true);
      expect(satisfies(['read'], 'none')).toBe(true);
    });

    it('refuses a key without permissions on every authenticated route', () => {
      for (const required of routes) expect(satisfies([], required)).toBe(false);
    });
  });

  describe('effectivePermissions', () => {
    it('lists every permission the strongest implies, weakest first', () => {
      expect(effectivePermissions(['read'])).toEqual(['read']);
      expect(effectivePermissions(['write'])).toEqual(['read', 'write']);
      expect(effectivePermissions(['delete'])).toEqual(['read', 'write', 'delete']);
      expect(effectivePermissions(['admin'])).toEqual(['read', 'write', 'delete', 'admin']);
    });

    it('does not depend on order or duplicates, and is empty for no permissions', () => {
      expect(effectivePermissions(['delete', 'read', 'delete'])).toEqual(['read', 'write', 'delete']);
      expect(effectivePermissions(['read', 'admin'])).toEqual(['read', 'write', 'delete', 'admin']);
      expect(effectivePermissions([])).toEqual([]);
    });

    it('returns a fresh array callers may change', () => {
      const first = effectivePermissions(['admin']);
      first.pop();
      expect(effectivePermissions(['admin'])).toEqual(['read', 'write', 'delete', 'admin']);
      expect(PERMISSION_LEVELS).toEqual(['read', 'write', 'delete', 'admin']);
    });
  });
});
