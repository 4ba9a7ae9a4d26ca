/**
 * A fixed-size ring of numeric rows, one Float64Array per field. Pushing past the capacity
 * overwrites the oldest row, so an hour of samples at 10 Hz costs exactly the memory of
 * `capacity` rows: the arrays are allocated once and never grow (resize() is the only
 * reallocation, and it is explicit).
 */
export class NumberRing<K extends string = string> {
  readonly fields: readonly K[];
  private _columns: Map<K, Float64Array>;
  private _capacity: number;
  private _start = 0;
  private _size = 0;

  constructor(fields: readonly K[], capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(
        `ring capacity must be a positive integer, not ${capacity}`
      );
    }
    this.fields = [...fields];
    this._capacity = capacity;
    this._columns = new Map(
      this.fields.map(f => [f, new Float64Array(capacity)] as [K, Float64Array])
    );
  }

  get size(): number {
    return this._size;
  }

  get capacity(): number {
    return this._capacity;
  }

  /** The backing arrays (for tests and memory accounting): length === capacity, always. */
  get storage(): readonly Float64Array[] {
    return [...this._columns.values()];
  }

  /** Adds a row; a missing or non-finite field is stored as NaN (a gap in the chart). */
  push(row: Partial<Record<K, number | null | undefined>>): void {
    const slot = (this._start + this._size) % this._capacity;
    for (const [field, column] of this._columns) {
      const value = row[field];
      column[slot] =
        typeof value === 'number' && Number.isFinite(value) ? value : NaN;
    }
    if (this._size < this._capacity) {
      this._size++;
    } else {
      this._start = (this._start + 1) % this._capacity;
    }
  }

  /** Field `field` of the i-th row, oldest first (i < 0 counts from the newest: -1 is the last). */
  at(i: number, field: K): number {
    const index = i < 0 ? this._size + i : i;
    if (index < 0 || index >= this._size) {
      return NaN;
    }
    const column = this._columns.get(field);
    return column ? column[(this._start + index) % this._capacity] : NaN;
  }

  /** One field, oldest first, as a fresh array of `size` values. */
  column(field: K): Float64Array {
    const out = new Float64Array(this._size);
    const column = this._columns.get(field);
    if (!column) {
      return out.fill(NaN);
    }
    const head = Math.min(this._size, this._capacity - this._start);
    out.set(column.subarray(this._start, this._start + head), 0);
    if (head < this._size) {
      out.set(column.subarray(0, this._size - head), head);
    }
    return out;
  }

  /** Changes the capacity, keeping the newest rows that fit. */
  resize(capacity: number): void {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(
        `ring capacity must be a positive integer, not ${capacity}`
      );
    }
    if (capacity === this._capacity) {
      return;
    }
    const keep = Math.min(this._size, capacity);
    const columns = new Map<K, Float64Array>();
    for (const field of this.fields) {
      const all = this.column(field);
      const next = new Float64Array(capacity);
      next.set(all.subarray(all.length - keep), 0);
      columns.set(field, next);
    }
    this._columns = columns;
    this._capacity = capacity;
    this._start = 0;
    this._size = keep;
  }

  clear(): void {
    this._start = 0;
    this._size = 0;
  }
}
