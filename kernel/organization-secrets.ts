/**
 * Organization secrets as other plugins may use them: names and, for the service's own use (a manifest's
 * `${{ secrets.NAME }}` at apply time), values. The secrets plugin provides it (values sealed at rest); the
 * HTTP API never returns a value.
 */
export interface OrganizationSecrets {
  /** The organization's secret names, sorted. */
  names(organizationId: string): Promise<string[]>;
  /** The values of the named secrets that exist (absent names are simply not in the map). */
  values(organizationId: string, names: readonly string[]): Promise<Map<string, string>>;
}

/** What a secret's name looks like (upper case, digits and `_`, starting with a letter). */
export const SECRET_NAME = /^[A-Z][A-Z0-9_]{0,63}$/;
