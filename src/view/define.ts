/**
 * Registers a custom element once. The same elements can reach one page twice (the labextension
 * and an exported report's inline bundle, or two copies of the extension); a second
 * `customElements.define` would throw and take the whole bundle down with it.
 */
export function define(name: string, ctor: CustomElementConstructor): void {
  if (!customElements.get(name)) {
    customElements.define(name, ctor);
  }
}
