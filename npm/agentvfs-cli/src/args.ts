// Command lines for avfs, built the same way by every method: the command's
// words, its flags, then `--` and the positional values, so a value that
// starts with "-" is never read as an option. The Python client's _args.py
// follows the same rules and units.

/**
 * A duration: a number is milliseconds (as the envelope's timeout_ms,
 * grace_ms and linger_ms; the Python client reads numbers the same way), a
 * string either a bare number (also milliseconds) or a Go duration such as
 * "1.5s", "200ms" or "1m30s" ("0": none), passed to avfs as it is.
 */
export type Duration = number | string;

const BARE_NUMBER = /^[0-9]+(\.[0-9]+)?$/;

/** A duration as avfs's flags take it: a Go duration string (numbers as integer microseconds). */
export function duration(d: Duration): string {
  if (typeof d === "string") {
    if (!BARE_NUMBER.test(d)) return d;
    d = Number(d);
  }
  if (typeof d !== "number" || !Number.isFinite(d) || d < 0) {
    throw new RangeError(`a duration is a finite number of milliseconds >= 0 or a Go duration string, not ${d}`);
  }
  return `${Math.round(d * 1000)}us`; // integer microseconds: no exponent ever reaches Go
}

/** A flag's type in docs/commands.json, "repeat" for a flag given once per value. */
export type FlagType = "bool" | "string" | "int" | "int64" | "duration" | "repeat" | string;
/** One flag of a call: its name (--max-output), type and value (undefined or false: not given). */
export type Flag = [name: string, type: FlagType, value: unknown];
/** A positional value and whether the argument is optional; an array for a variadic argument. */
export type Positional = [value: string | string[] | undefined, optional: boolean];

/** The command-line words of flags, in the order given. */
export function flagArgs(flags: Flag[]): string[] {
  const out: string[] = [];
  for (const [name, type, v] of flags) {
    if (v === undefined || v === false) continue;
    switch (type) {
      case "bool":
        if (v !== true) throw new TypeError(`${name} is a switch: true or false, not ${String(v)}`);
        out.push(name);
        break;
      case "repeat":
        if (!Array.isArray(v)) throw new TypeError(`${name} takes an array of values`);
        for (const item of v) out.push(name, String(item));
        break;
      case "duration":
        out.push(name, duration(v as Duration));
        break;
      case "int": case "int64": case "int32": case "uint": case "uint64":
        if (typeof v !== "number" || !Number.isInteger(v)) throw new TypeError(`${name} takes an integer, not ${String(v)}`);
        out.push(name, String(v));
        break;
      default:
        out.push(name, String(v));
    }
  }
  return out;
}

/**
 * `--` and the positional values, in the command's order. An optional value
 * left out (undefined) must not be followed by another optional one that is
 * given: avfs would read that one in its place.
 */
export function positionalArgs(values: Positional[]): string[] {
  const out: string[] = [];
  let gap = false;
  for (const [value, optional] of values) {
    if (value === undefined) {
      if (!optional) throw new TypeError("a required argument is undefined");
      gap = true;
      continue;
    }
    if (optional && gap) throw new RangeError("an optional argument is given after one left out");
    out.push(...(Array.isArray(value) ? value : [value]));
  }
  return out.length ? ["--", ...out] : [];
}

/** A whole command line after the global flags. */
export function commandArgs(path: string[], values: Positional[], flags: Flag[]): string[] {
  return [...path, ...flagArgs(flags), ...positionalArgs(values)];
}

/** What every generated call takes besides its flags. */
export interface CallOptions {
  /** the vault to work on, over the client's default (vault-scoped commands only) */
  vault?: string;
  /** written to avfs's stdin (write, proxy exec --stdin) */
  input?: string | Uint8Array;
}

/** Runs one command for the generated stubs: `scoped` passes --vault. */
export type Invoke = (path: string[], values: Positional[], flags: Flag[], o: CallOptions & { scoped: boolean }) => Promise<unknown>;
