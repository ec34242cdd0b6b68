/** LED state: on at or above the dataset's ledThreshold; without one, on when non-zero. */
export function ledOn(value: number, threshold: number | null | undefined): boolean {
  if (!Number.isFinite(value)) return false;
  if (threshold === null || threshold === undefined || !Number.isFinite(threshold)) return value !== 0;
  return value >= threshold;
}
