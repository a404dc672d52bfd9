/** How the kernel turns `X-Namespace` (a name or an `ns_` id) into a namespace. A resource plugin provides it. */
export interface ResolvedNamespace {
  id: string;
  name: string;
}

export interface NamespaceResolver {
  resolve(organizationId: string, nameOrId: string): Promise<ResolvedNamespace | undefined>;
}
