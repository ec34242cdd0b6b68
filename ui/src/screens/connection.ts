/** Connect-screen form state and the pure mapping between it and a project source's
 *  `connection` / `parser` JSON (docs/project.schema.json). No backend calls; each source
 *  kind's fields component is imported only when the Connect screen shows it.
 *
 *  Every source kind is one entry of `SOURCE_KINDS` (below): its defaults, how it reads a
 *  project's connection, what it refuses, the connection it writes, its title, framing and
 *  fields. The form functions here only dispatch to it. */
import type { Component } from "svelte";
import type { Key } from "../lib/i18n/index.svelte";
import type { Connection, CredentialPart, CredentialsRequest, Destination, ParserConfig } from "../lib/wire/types.gen";

/** Connection kinds set up on another screen, not here: a replay of a capture or CSV file
 *  is started from the Recording screen. */
export const SET_UP_ELSEWHERE = ["replay"] as const satisfies readonly Connection["type"][];
/** Every kind of source the Connect screen sets up (from the generated wire types). */
export type SourceType = Exclude<Connection["type"], (typeof SET_UP_ELSEWHERE)[number]>;
type Missing<All, Listed> = Exclude<All, Listed>;

/** Every parser the backend knows. */
export type ParserKind = ParserConfig["kind"];
export const PARSER_KINDS = ["quickPlot", "delimited", "keyValue", "json", "nmea", "fixedWidth", "binary", "script", "can"] as const satisfies readonly ParserKind[];
/** Compile-time: the list above names every parser kind. */
const _everyParser: Missing<ParserKind, (typeof PARSER_KINDS)[number]> extends never ? true : never = true;
void _everyParser;

export const BAUD_RATES = [300, 1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400, 250000, 460800, 500000, 921600, 1000000, 2000000, 3000000];
/** The backend accepts any rate up to 15 Mbaud (a rate the port cannot do fails the open). */
export const MAX_BAUD = 15_000_000;

export type Json = Record<string, unknown>;

export interface SerialForm {
  port: string;
  baud: string;
  dataBits: number;
  parity: "none" | "even" | "odd" | "mark" | "space";
  stopBits: "one" | "onePointFive" | "two";
  flowControl: "none" | "rtsCts" | "xonXoff";
  dtr: boolean;
  rts: boolean;
  autoReconnect: boolean;
}

export interface ConnectForm {
  type: SourceType;
  title: string;
  serial: SerialForm;
  tcp: { host: string; port: string; tls: boolean };
  udp: { localPort: string; remoteHost: string; remotePort: string; multicastGroup: string; multicastInterface: string };
  mqtt: {
    host: string; port: string; clientId: string; username: string; topic: string;
    version: "3.1.1" | "5"; keepAliveS: string; cleanSession: boolean; tls: boolean; caFile: string;
  };
  can: { interface: string; slcan: boolean; bitrate: string; fd: boolean; dataBitrate: string; listenOnly: boolean };
  modbus: { rtu: boolean; host: string; port: string; slaveId: string; pollIntervalMs: string; groups: { kind: "coil" | "discrete" | "holding" | "input"; start: string; count: string }[] };
  ble: { device: string; service: string; notifyCharacteristic: string; writeCharacteristic: string };
  namedPipe: { path: string };
  process: { program: string; args: string; workingDir: string };
  /** Kept verbatim: the simulator is configured in the project file, not here. */
  simulator: Json;
  /** Typed or picked here, saved in the secret store (never the project) on connect. */
  secrets: SecretsDraft;
  parserKind: ParserKind;
  separator: string;
}

/** The choices of the serial and Modbus fields, in the order the screen offers them. */
export const PARITIES: SerialForm["parity"][] = ["none", "even", "odd", "mark", "space"];
export const FLOW_CONTROLS: SerialForm["flowControl"][] = ["none", "rtsCts", "xonXoff"];
export const REGISTER_KINDS: ConnectForm["modbus"]["groups"][number]["kind"][] = ["coil", "discrete", "holding", "input"];

export function defaultSerial(): SerialForm {
  return { port: "", baud: "115200", dataBits: 8, parity: "none", stopBits: "one", flowControl: "none", dtr: true, rts: true, autoReconnect: true };
}

/** A file a person picked (a PEM certificate or key): its name to show, its text to save. */
export interface PickedFile {
  name: string;
  text: string;
}

/** Credentials typed or picked in the form and not saved yet. The password and files go to
 *  the secret store (the OS keyring), bound to where the form connects; never the project. */
export interface SecretsDraft {
  password: string;
  ca: PickedFile | null;
  cert: PickedFile | null;
  key: PickedFile | null;
  /** Saved parts the person removed. */
  clear: CredentialPart[];
}

export function emptySecrets(): SecretsDraft {
  return { password: "", ca: null, cert: null, key: null, clear: [] };
}

/** Where the form connects, for the sources that take credentials (MQTT; TCP over TLS). */
export function credentialDestination(f: ConnectForm): Destination | null {
  if (f.type === "mqtt") return { protocol: "mqtt", host: f.mqtt.host.trim(), port: int(f.mqtt.port), tls: f.mqtt.tls };
  if (f.type === "tcp" && f.tcp.tls) return { protocol: "tcp", host: f.tcp.host.trim(), port: int(f.tcp.port), tls: true };
  return null;
}

/** Whether two destinations are the same place (the saved credentials go there). */
export function sameDestination(a: Destination | null | undefined, b: Destination | null | undefined): boolean {
  return !!a && !!b && a.protocol === b.protocol && a.host === b.host && a.port === b.port && a.tls === b.tls;
}

/** The request that saves what the form holds for source `id`; null when nothing changed. */
export function credentialsSave(f: ConnectForm, id: string): CredentialsRequest | null {
  const destination = credentialDestination(f);
  const d = f.secrets;
  if (!destination || (!d.password && !d.ca && !d.cert && !d.key && !d.clear.length)) return null;
  const tls = destination.tls;
  return {
    op: "set",
    target: { kind: "source", id },
    destination,
    password: f.type === "mqtt" && d.password ? d.password : null,
    caPem: tls && d.ca ? d.ca.text : null,
    clientCertPem: tls && d.cert ? d.cert.text : null,
    clientKeyPem: tls && d.key ? d.key.text : null,
    clear: d.clear,
  };
}

export function defaultForm(): ConnectForm {
  const sections = Object.fromEntries(SOURCE_TYPES.map((type) => [type, SOURCE_KINDS[type].defaults()]));
  return {
    type: "serial",
    title: "",
    ...(sections as { [T in SourceType]: ConnectForm[T] }),
    secrets: emptySecrets(),
    // Quick plot is the zero-configuration default: any CSV line stream plots at once.
    parserKind: "quickPlot",
    separator: ",",
  };
}

/** A baud rate typed by a person: null when valid, else a reason key for t(). */
export function baudError(text: string): Key | null {
  const s = text.trim();
  if (!/^\d+$/.test(s)) return "connect.err.baudNumber";
  const n = Number(s);
  if (n < 1 || n > MAX_BAUD) return "connect.err.baudRange";
  return null;
}

/** A TCP/UDP port number: null when valid (1–65535, or 0 when `allowZero`). */
export function portError(text: string, allowZero = false): Key | null {
  const s = text.trim();
  if (!/^\d+$/.test(s)) return "connect.err.portNumber";
  const n = Number(s);
  if (n > 65535 || (n === 0 && !allowZero)) return "connect.err.portRange";
  return null;
}

const int = (s: string) => Number.parseInt(s.trim(), 10);
const optStr = (s: string) => (s.trim() === "" ? null : s.trim());
const optInt = (s: string) => (s.trim() === "" ? null : int(s));

/** Shell-like split of a process's arguments: whitespace separates, quotes group. */
export function splitArgs(s: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s))) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

export function serialJson(s: SerialForm): Json {
  return {
    port: s.port.trim(), baud: int(s.baud), dataBits: s.dataBits, parity: s.parity, stopBits: s.stopBits,
    flowControl: s.flowControl, dtr: s.dtr, rts: s.rts, autoReconnect: s.autoReconnect,
  };
}

/** Every problem with the form, as [field, reason key] pairs; empty when it can be sent. */
export function formErrors(f: ConnectForm): [string, Key][] {
  const errs: [string, Key][] = [];
  const need = (field: string, v: string) => v.trim() === "" && errs.push([field, "connect.err.required"]);
  const port = (field: string, v: string, zero = false) => {
    const e = portError(v, zero);
    if (e) errs.push([field, e]);
  };
  const baud = (field: string, v: string) => {
    const e = baudError(v);
    if (e) errs.push([field, e]);
  };
  SOURCE_KINDS[f.type].check(f, { need, port, baud });
  return errs;
}

/** The `connection` object of a source, from the form. */
export function buildConnection(f: ConnectForm): Json {
  return SOURCE_KINDS[f.type].connection(f);
}

/** The default parser config for a kind, as a new source gets it. */
export function defaultParser(kind: ParserKind, separator = ","): Json {
  switch (kind) {
    case "quickPlot": return { kind };
    case "delimited": return { kind, separator: separator || "," };
    case "keyValue": return { kind, keys: [], pairSeparator: ",", valueSeparator: "=" };
    case "json": return { kind, paths: [] };
    case "nmea": return { kind };
    case "fixedWidth": return { kind, widths: [] };
    case "binary": return { kind, fields: [] };
    case "script": return { kind, language: "javascript", code: DEFAULT_SCRIPT.javascript };
    case "can": return { kind, messages: [] };
  }
}

export const DEFAULT_SCRIPT = {
  javascript: "function parse(frame) {\n  return frame.split(',');\n}\n",
  lua: "function parse(frame)\n  local out = {}\n  for v in string.gmatch(frame, '([^,]+)') do\n    out[#out + 1] = v\n  end\n  return out\nend\n",
};

/** Framing that fits a connection type: message buses hand over one frame per chunk. */
export function defaultFraming(type: SourceType): Json | undefined {
  const framing = SOURCE_KINDS[type].framing;
  return framing ? { ...framing } : undefined;
}

/** `project.source.add` params for a new source built from the form. */
export function buildSourceAdd(f: ConnectForm): { source: Json } {
  const source: Json = {
    id: "",
    title: f.title.trim() || defaultTitle(f),
    connection: buildConnection(f),
    parser: defaultParser(f.parserKind, f.separator),
  };
  const framing = defaultFraming(f.type);
  if (framing) source.framing = framing;
  return { source };
}

export function defaultTitle(f: ConnectForm): string {
  return SOURCE_KINDS[f.type].title(f);
}

const s = (v: unknown, d = "") => (v === null || v === undefined ? d : String(v));

function serialFrom(c: Json, base: SerialForm): SerialForm {
  return {
    port: s(c.port, base.port), baud: s(c.baud, base.baud), dataBits: Number(c.dataBits ?? base.dataBits),
    parity: (c.parity as SerialForm["parity"]) ?? base.parity, stopBits: (c.stopBits as SerialForm["stopBits"]) ?? base.stopBits,
    flowControl: (c.flowControl as SerialForm["flowControl"]) ?? base.flowControl,
    dtr: c.dtr === undefined ? base.dtr : !!c.dtr, rts: c.rts === undefined ? base.rts : !!c.rts,
    autoReconnect: c.autoReconnect === undefined ? base.autoReconnect : !!c.autoReconnect,
  };
}

/** The form showing an existing source (unknown fields keep their defaults). */
export function formFromSource(src: Json): ConnectForm {
  const f = defaultForm();
  const c = (src.connection ?? {}) as Json;
  const type = (SOURCE_TYPES as readonly string[]).includes(String(c.type)) ? (c.type as SourceType) : "simulator";
  f.type = type;
  f.title = s(src.title);
  const p = (src.parser ?? {}) as Json;
  f.parserKind = (PARSER_KINDS as readonly string[]).includes(String(p.kind)) ? (p.kind as ParserKind) : "quickPlot";
  if (p.kind === "delimited") f.separator = s(p.separator, ",");
  SOURCE_KINDS[type].read(c, f);
  return f;
}

/** A JSON merge patch (RFC 7386) that turns `from` into exactly `to`: keys only in `from`
 *  become null. Needed because the backend merges `connection` recursively, so switching
 *  from TCP to serial would otherwise keep a stale `host`. */
export function replacePatch(from: unknown, to: unknown): unknown {
  const isObj = (v: unknown): v is Json => !!v && typeof v === "object" && !Array.isArray(v);
  if (!isObj(from) || !isObj(to)) return to;
  const out: Json = {};
  for (const k of Object.keys(from)) if (!(k in to)) out[k] = null;
  for (const [k, v] of Object.entries(to)) {
    // A null in the target means "absent" for optional fields; keep it as a removal.
    if (JSON.stringify(from[k]) !== JSON.stringify(v)) out[k] = isObj(from[k]) && isObj(v) ? replacePatch(from[k], v) : v;
  }
  return out;
}

/** `project.source.update` changes that make an existing source match the form. The parser
 *  is only replaced when its kind changed, so a tuned parser config survives a port change. */
export function buildSourceChanges(src: Json, f: ConnectForm): Json {
  const changes: Json = {};
  const conn = buildConnection(f);
  const patch = replacePatch(src.connection ?? {}, conn) as Json;
  if (Object.keys(patch).length) changes.connection = patch;
  // A name derived from the connection (e.g. the port's file name) follows the connection;
  // a name the person chose stays.
  const auto = src.title === defaultTitle(formFromSource(src));
  const title = f.title.trim() || (auto ? defaultTitle(f) : "");
  if (title && title !== src.title) changes.title = title;
  const p = (src.parser ?? {}) as Json;
  if (p.kind !== f.parserKind) changes.parser = replacePatch(p, defaultParser(f.parserKind, f.separator));
  else if (f.parserKind === "delimited" && p.separator !== f.separator) changes.parser = { separator: f.separator };
  return changes;
}

/** What a source kind's `check` reports through: a required field, a port, a baud rate. */
export interface FieldChecks {
  need: (field: string, value: string) => void;
  port: (field: string, value: string, allowZero?: boolean) => void;
  baud: (field: string, value: string) => void;
}

/** The props every source kind's fields component takes: the whole form (Modbus RTU also
 *  edits the serial section) and the refused fields' reasons. */
/** What every kind's fields get; `sourceId` (null for a new source) and `version` are for the
 *  kinds that take credentials. */
export type FieldsProps = { form: ConnectForm; errors?: Record<string, Key>; sourceId?: string | null; version?: number };

/** One kind of source: everything the Connect screen and the form functions do per kind. */
export interface SourceKind<T extends SourceType> {
  /** The kind's name on the Connect screen (`connect.type.*`). */
  label: Key;
  /** The form's section for a new source of this kind. */
  defaults: () => ConnectForm[T];
  /** Fills the form from an existing source's `connection` (absent fields keep defaults). */
  read: (c: Json, f: ConnectForm) => void;
  /** Reports the form's problems for this kind. */
  check: (f: ConnectForm, checks: FieldChecks) => void;
  /** The source's `connection` object, from the form. */
  connection: (f: ConnectForm) => Json;
  /** The source's title when the person gave none. */
  title: (f: ConnectForm) => string;
  /** The framing a new source gets, when not the default (message buses hand over one
   *  frame per chunk). */
  framing?: Json;
  /** The Connect screen's fields for this kind. */
  fields: () => Promise<{ default: Component<FieldsProps> }>;
}

/** `load`, run once: the same promise for every caller, so a form that changes but keeps
 *  its kind keeps its fields component. */
function once<T>(load: () => Promise<T>): () => Promise<T> {
  let loaded: Promise<T> | null = null;
  return () => (loaded ??= load());
}

/** Every source kind, in the order the Connect screen offers them; the mapped type makes a
 *  kind missing here (a new one in Rust) a type error. */
export const SOURCE_KINDS: { [T in SourceType]: SourceKind<T> } = {
  serial: {
    label: "connect.type.serial",
    defaults: defaultSerial,
    read: (c, f) => void (f.serial = serialFrom(c, f.serial)),
    check: (f, { need, baud }) => {
      need("serial.port", f.serial.port);
      baud("serial.baud", f.serial.baud);
    },
    connection: (f) => ({ type: "serial", ...serialJson(f.serial) }),
    title: (f) => f.serial.port.trim().split(/[\\/]/).pop() || "Serial",
    fields: once(() => import("./connect/SerialSourceFields.svelte")),
  },
  tcp: {
    label: "connect.type.tcp",
    defaults: () => ({ host: "127.0.0.1", port: "", tls: false }),
    read: (c, f) => void (f.tcp = { host: s(c.host), port: s(c.port), tls: !!c.tls }),
    check: (f, { need, port }) => {
      need("tcp.host", f.tcp.host);
      port("tcp.port", f.tcp.port);
    },
    connection: (f) => ({ type: "tcp", host: f.tcp.host.trim(), port: int(f.tcp.port), ...(f.tcp.tls ? { tls: true } : {}) }),
    title: (f) => `${f.tcp.host}:${f.tcp.port}`,
    fields: once(() => import("./connect/TcpFields.svelte")),
  },
  udp: {
    label: "connect.type.udp",
    defaults: () => ({ localPort: "0", remoteHost: "", remotePort: "", multicastGroup: "", multicastInterface: "" }),
    read: (c, f) => {
      f.udp = { localPort: s(c.localPort, "0"), remoteHost: s(c.remoteHost), remotePort: s(c.remotePort), multicastGroup: s(c.multicastGroup), multicastInterface: s(c.multicastInterface) };
    },
    check: (f, { port }) => {
      port("udp.localPort", f.udp.localPort, true);
      if (f.udp.remotePort.trim()) port("udp.remotePort", f.udp.remotePort);
    },
    connection: (f) => ({
      type: "udp", localPort: int(f.udp.localPort || "0"), remoteHost: optStr(f.udp.remoteHost),
      remotePort: optInt(f.udp.remotePort), multicastGroup: optStr(f.udp.multicastGroup),
      multicastInterface: optStr(f.udp.multicastInterface),
    }),
    title: (f) => `UDP ${f.udp.localPort}`,
    fields: once(() => import("./connect/UdpFields.svelte")),
  },
  mqtt: {
    label: "connect.type.mqtt",
    defaults: () => ({ host: "127.0.0.1", port: "1883", clientId: "", username: "", topic: "#", version: "3.1.1", keepAliveS: "30", cleanSession: true, tls: false, caFile: "" }),
    read: (c, f) => {
      f.mqtt = {
        host: s(c.host, "127.0.0.1"), port: s(c.port, "1883"), clientId: s(c.clientId), username: s(c.username), topic: s(c.topic, "#"),
        version: c.version === "5" ? "5" : "3.1.1", keepAliveS: s(c.keepAliveS, "30"), cleanSession: c.cleanSession !== false, tls: !!c.tls, caFile: s(c.caFile),
      };
    },
    check: (f, { need, port }) => {
      need("mqtt.host", f.mqtt.host);
      port("mqtt.port", f.mqtt.port);
      need("mqtt.topic", f.mqtt.topic);
    },
    connection: (f) => {
      const m = f.mqtt;
      return {
        type: "mqtt", host: m.host.trim(), port: int(m.port), clientId: m.clientId.trim(), username: optStr(m.username),
        topic: m.topic.trim(), version: m.version, keepAliveS: int(m.keepAliveS || "30"), cleanSession: m.cleanSession,
        tls: m.tls, caFile: m.tls ? optStr(m.caFile) : null,
      };
    },
    title: (f) => `MQTT ${f.mqtt.topic}`,
    framing: { mode: "none" },
    fields: once(() => import("./connect/MqttFields.svelte")),
  },
  can: {
    label: "connect.type.can",
    defaults: () => ({ interface: "can0", slcan: false, bitrate: "500000", fd: false, dataBitrate: "", listenOnly: false }),
    read: (c, f) => {
      f.can = { interface: s(c.interface, "can0"), slcan: !!c.slcan, bitrate: s(c.bitrate, "500000"), fd: !!c.fd, dataBitrate: s(c.dataBitrate), listenOnly: !!c.listenOnly };
    },
    check: (f, { need }) => need("can.interface", f.can.interface),
    connection: (f) => {
      const c = f.can;
      return {
        type: "can", interface: c.interface.trim(), slcan: c.slcan, bitrate: int(c.bitrate), fd: c.fd,
        dataBitrate: c.fd ? optInt(c.dataBitrate) : null, listenOnly: c.listenOnly,
      };
    },
    title: (f) => f.can.interface,
    framing: { mode: "none" },
    fields: once(() => import("./connect/CanFields.svelte")),
  },
  modbus: {
    label: "connect.type.modbus",
    defaults: () => ({ rtu: false, host: "127.0.0.1", port: "502", slaveId: "1", pollIntervalMs: "100", groups: [{ kind: "holding", start: "0", count: "10" }] }),
    read: (c, f) => {
      f.modbus = {
        rtu: !!c.rtu, host: s(c.host, "127.0.0.1"), port: s(c.port, "502"), slaveId: s(c.slaveId, "1"), pollIntervalMs: s(c.pollIntervalMs, "100"),
        groups: Array.isArray(c.groups) ? (c.groups as Json[]).map((g) => ({ kind: g.kind as "holding", start: s(g.start), count: s(g.count) })) : [],
      };
      if (c.serial && typeof c.serial === "object") f.serial = serialFrom(c.serial as Json, f.serial);
    },
    check: (f, { need, port, baud }) => {
      if (f.modbus.rtu) {
        need("serial.port", f.serial.port);
        baud("serial.baud", f.serial.baud);
      } else {
        need("modbus.host", f.modbus.host);
        port("modbus.port", f.modbus.port);
      }
    },
    connection: (f) => {
      const m = f.modbus;
      return {
        type: "modbus", rtu: m.rtu, host: m.host.trim(), port: int(m.port), serial: m.rtu ? serialJson(f.serial) : null,
        slaveId: int(m.slaveId), pollIntervalMs: int(m.pollIntervalMs),
        groups: m.groups.map((g) => ({ kind: g.kind, start: int(g.start), count: int(g.count) })),
      };
    },
    title: () => "Modbus",
    framing: { mode: "none" },
    fields: once(() => import("./connect/ModbusFields.svelte")),
  },
  ble: {
    label: "connect.type.ble",
    defaults: () => ({ device: "", service: "", notifyCharacteristic: "", writeCharacteristic: "" }),
    read: (c, f) => {
      f.ble = { device: s(c.device), service: s(c.service), notifyCharacteristic: s(c.notifyCharacteristic), writeCharacteristic: s(c.writeCharacteristic) };
    },
    check: (f, { need }) => need("ble.device", f.ble.device),
    connection: (f) => {
      const b = f.ble;
      return {
        type: "ble", device: b.device.trim(), service: b.service.trim(),
        notifyCharacteristic: b.notifyCharacteristic.trim(), writeCharacteristic: optStr(b.writeCharacteristic),
      };
    },
    title: (f) => f.ble.device || "BLE",
    framing: { mode: "none" },
    fields: once(() => import("./connect/BleFields.svelte")),
  },
  namedPipe: {
    label: "connect.type.namedPipe",
    defaults: () => ({ path: "" }),
    read: (c, f) => void (f.namedPipe = { path: s(c.path) }),
    check: (f, { need }) => need("namedPipe.path", f.namedPipe.path),
    connection: (f) => ({ type: "namedPipe", path: f.namedPipe.path.trim() }),
    title: (f) => f.namedPipe.path.split(/[\\/]/).pop() || "Pipe",
    fields: once(() => import("./connect/PipeFields.svelte")),
  },
  process: {
    label: "connect.type.process",
    defaults: () => ({ program: "", args: "", workingDir: "" }),
    read: (c, f) => {
      f.process = { program: s(c.program), args: Array.isArray(c.args) ? (c.args as string[]).map((a) => (/\s/.test(a) ? `"${a}"` : a)).join(" ") : "", workingDir: s(c.workingDir) };
    },
    check: (f, { need }) => need("process.program", f.process.program),
    connection: (f) => ({ type: "process", program: f.process.program.trim(), args: splitArgs(f.process.args), workingDir: optStr(f.process.workingDir) }),
    title: (f) => f.process.program.split(/[\\/]/).pop() || "Process",
    fields: once(() => import("./connect/ProcessFields.svelte")),
  },
  simulator: {
    label: "connect.type.simulator",
    // A new simulator is a three-channel signal generator: with no channels it would
    // connect and send empty frames, which looks broken.
    defaults: () => ({
      frameRateHz: 100,
      channels: [
        { name: "Sine", waveform: "sine", frequencyHz: 1, amplitude: 1, offset: 0, noise: 0.01 },
        { name: "Square", waveform: "square", frequencyHz: 0.5, amplitude: 1, offset: 0, noise: 0 },
        { name: "Noise", waveform: "noise", frequencyHz: 0, amplitude: 0.5, offset: 0, noise: 0 },
      ],
      gps: false,
      imu: false,
      seed: 1,
    }),
    // Kept verbatim: the simulator is configured in the project file, not here.
    read: (c, f) => {
      const { type: _t, ...rest } = c;
      f.simulator = rest;
    },
    check: () => {},
    connection: (f) => ({ ...f.simulator, type: "simulator" }),
    title: () => "Simulator",
    fields: once(() => import("./connect/SimulatorFields.svelte")),
  },
};

/** The source kinds in the order the Connect screen offers them. */
export const SOURCE_TYPES = Object.keys(SOURCE_KINDS) as SourceType[];
