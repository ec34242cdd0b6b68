// The Connect form ↔ project source mapping: what reaches project.source.add/update.
import { describe, expect, it } from "vitest";
import {
  baudError, buildConnection, buildSourceAdd, buildSourceChanges, credentialDestination, credentialsSave, defaultForm,
  formErrors, formFromSource, portError, replacePatch, sameDestination, splitArgs,
} from "../src/screens/connection";

describe("baud rate validation", () => {
  it("accepts standard and custom rates up to 15 Mbaud", () => {
    for (const b of ["9600", "115200", "250000", "1234567", " 921600 ", "15000000"]) expect(baudError(b), b).toBeNull();
  });
  it("refuses non-numbers, zero, fractions and rates over 15 Mbaud", () => {
    for (const b of ["", "abc", "0", "9600.5", "-9600", "15000001", "1e6"]) expect(baudError(b), b).not.toBeNull();
  });
});

describe("port validation", () => {
  it("needs 1–65535 unless zero is allowed", () => {
    expect(portError("8080")).toBeNull();
    expect(portError("0")).not.toBeNull();
    expect(portError("0", true)).toBeNull();
    expect(portError("65536")).not.toBeNull();
    expect(portError("")).not.toBeNull();
  });
});

describe("a new serial source", () => {
  it("defaults to Quick plot and sends every serial setting with numbers as numbers", () => {
    const f = defaultForm();
    f.serial.port = "/dev/ttyUSB0";
    f.serial.baud = "921600";
    f.serial.parity = "even";
    f.serial.dtr = false;
    const p = buildSourceAdd(f);
    expect(p.source.parser).toEqual({ kind: "quickPlot" });
    expect(p.source.connection).toEqual({
      type: "serial", port: "/dev/ttyUSB0", baud: 921600, dataBits: 8, parity: "even", stopBits: "one",
      flowControl: "none", dtr: false, rts: true, autoReconnect: true,
    });
    expect(p.source.title).toBe("ttyUSB0");
    expect(p.source.id).toBe("");
    expect(p.source).not.toHaveProperty("framing");
  });

  it("is refused by formErrors without a port or with a bad baud", () => {
    const f = defaultForm();
    f.serial.baud = "fast";
    expect(formErrors(f).map(([k]) => k).sort()).toEqual(["serial.baud", "serial.port"]);
  });
});

describe("other connection types", () => {
  it("TCP sends host and a numeric port", () => {
    const f = defaultForm();
    f.type = "tcp";
    f.tcp = { host: " 10.0.0.2 ", port: "5000", tls: false };
    expect(buildConnection(f)).toEqual({ type: "tcp", host: "10.0.0.2", port: 5000 });
    expect(formErrors(f)).toEqual([]);
  });

  it("UDP turns empty optional fields into null", () => {
    const f = defaultForm();
    f.type = "udp";
    f.udp.localPort = "9000";
    expect(buildConnection(f)).toEqual({ type: "udp", localPort: 9000, remoteHost: null, remotePort: null, multicastGroup: null, multicastInterface: null });
  });

  it("MQTT drops the CA file unless TLS is on, and message buses frame per chunk", () => {
    const f = defaultForm();
    f.type = "mqtt";
    f.mqtt.caFile = "/etc/ca.pem";
    expect(buildConnection(f).caFile).toBeNull();
    f.mqtt.tls = true;
    f.mqtt.version = "5";
    const c = buildConnection(f);
    expect(c).toMatchObject({ type: "mqtt", port: 1883, tls: true, caFile: "/etc/ca.pem", version: "5", username: null });
    expect(buildSourceAdd(f).source.framing).toEqual({ mode: "none" });
  });

  it("Modbus RTU carries the serial settings; TCP does not", () => {
    const f = defaultForm();
    f.type = "modbus";
    expect(buildConnection(f).serial).toBeNull();
    f.modbus.rtu = true;
    f.serial.port = "/dev/ttyS1";
    f.serial.baud = "19200";
    const c = buildConnection(f) as any;
    expect(c.serial.baud).toBe(19200);
    expect(c.groups).toEqual([{ kind: "holding", start: 0, count: 10 }]);
  });

  it("process arguments split like a shell, quotes grouping", () => {
    expect(splitArgs(`--port 3 "two words" 'x y'  z`)).toEqual(["--port", "3", "two words", "x y", "z"]);
  });
});

describe("editing an existing source", () => {
  const src = {
    id: "src-1", title: "Bench",
    connection: { type: "tcp", host: "10.0.0.2", port: 5000 },
    parser: { kind: "delimited", separator: ";" },
  };

  it("reads the form back from the source", () => {
    const f = formFromSource(src);
    expect(f.type).toBe("tcp");
    expect(f.tcp).toEqual({ host: "10.0.0.2", port: "5000", tls: false });
    expect(f.parserKind).toBe("delimited");
    expect(f.separator).toBe(";");
  });

  it("switching TCP → serial removes the stale TCP fields and keeps the tuned parser", () => {
    const f = formFromSource(src);
    f.type = "serial";
    f.serial.port = "COM3";
    const ch = buildSourceChanges(src, f) as any;
    expect(ch.connection.host).toBeNull();
    expect(ch.connection.type).toBe("serial");
    expect(ch.connection.port).toBe("COM3");
    expect(ch).not.toHaveProperty("parser");
  });

  it("changing the parser kind replaces the parser config", () => {
    const f = formFromSource(src);
    f.parserKind = "quickPlot";
    expect((buildSourceChanges(src, f) as any).parser).toEqual({ kind: "quickPlot", separator: null });
  });

  it("an automatic name follows the port; a chosen name stays", () => {
    const serial = { id: "src-2", title: "ttyUSB0", connection: { type: "serial", port: "/dev/ttyUSB0", baud: 115200 }, parser: { kind: "quickPlot" } };
    const f = formFromSource(serial);
    f.title = "";
    f.serial.port = "/dev/ttyACM1";
    expect(buildSourceChanges(serial, f).title).toBe("ttyACM1");
    const named = { ...serial, title: "Rover" };
    const g = formFromSource(named);
    g.title = "";
    g.serial.port = "/dev/ttyACM1";
    expect(buildSourceChanges(named, g)).not.toHaveProperty("title");
  });

  it("no change gives no changes", () => {
    expect(buildSourceChanges(src, formFromSource(src))).toEqual({});
  });
});

describe("replacePatch", () => {
  it("produces a merge patch that, applied, gives exactly the target", () => {
    const apply = (t: any, p: any): any => {
      if (!p || typeof p !== "object" || Array.isArray(p)) return p;
      const out = { ...(t && typeof t === "object" ? t : {}) };
      for (const [k, v] of Object.entries(p)) v === null ? delete out[k] : (out[k] = apply(out[k], v));
      return out;
    };
    const from = { a: 1, b: { c: 2, d: 3 }, e: [1, 2] };
    const to = { a: 1, b: { c: 5 }, e: [3], f: "x" };
    const patch = replacePatch(from, to);
    expect(patch).toEqual({ b: { c: 5, d: null }, e: [3], f: "x" });
    expect(apply(from, patch)).toEqual(to);
  });
});

describe("credentials typed in the form", () => {
  const mqtt = () => {
    const f = defaultForm();
    f.type = "mqtt";
    f.mqtt.host = " broker.lab ";
    f.mqtt.port = "8883";
    f.mqtt.tls = true;
    return f;
  };
  const pem = (name: string) => ({ name, text: `-----BEGIN ${name}-----` });

  it("saves nothing when nothing was typed, picked or removed", () => {
    expect(credentialsSave(mqtt(), "broker")).toBeNull();
  });

  it("binds what was typed to the address and TLS setting the form shows", () => {
    const f = mqtt();
    f.secrets.password = "s3cret";
    f.secrets.ca = pem("CA");
    expect(credentialsSave(f, "broker")).toEqual({
      op: "set", target: { kind: "source", id: "broker" },
      destination: { protocol: "mqtt", host: "broker.lab", port: 8883, tls: true },
      password: "s3cret", caPem: "-----BEGIN CA-----", clientCertPem: null, clientKeyPem: null, clear: [],
    });
  });

  it("sends no certificate for a connection without TLS, and nothing for plain TCP", () => {
    const f = mqtt();
    f.mqtt.tls = false;
    f.secrets.ca = pem("CA");
    f.secrets.password = "p";
    const r = credentialsSave(f, "broker");
    expect(r && r.op === "set" && [r.caPem, r.password]).toEqual([null, "p"]);
    const tcp = defaultForm();
    tcp.type = "tcp";
    tcp.tcp = { host: "10.0.0.2", port: "5000", tls: false };
    tcp.secrets.key = pem("KEY");
    expect(credentialDestination(tcp)).toBeNull();
    expect(credentialsSave(tcp, "dev")).toBeNull();
    tcp.tcp.tls = true;
    const tls = credentialsSave(tcp, "dev");
    expect(tls && tls.op === "set" && [tls.password, tls.clientKeyPem]).toEqual([null, "-----BEGIN KEY-----"]);
  });

  it("a removed part is a change even with nothing typed", () => {
    const f = mqtt();
    f.secrets.clear.push("password");
    const r = credentialsSave(f, "broker");
    expect(r && r.op === "set" && r.clear).toEqual(["password"]);
  });

  it("treats another host, port or TLS setting as another place", () => {
    const d = credentialDestination(mqtt())!;
    expect(sameDestination(d, { ...d })).toBe(true);
    for (const other of [{ ...d, host: "evil" }, { ...d, port: 1883 }, { ...d, tls: false }]) expect(sameDestination(d, other)).toBe(false);
    expect(sameDestination(d, null)).toBe(false);
  });

  it("keeps a TCP source's TLS setting across the form", () => {
    const f = formFromSource({ id: "d", connection: { type: "tcp", host: "h", port: 1, tls: true } });
    expect(f.tcp.tls).toBe(true);
    expect(buildConnection(f)).toEqual({ type: "tcp", host: "h", port: 1, tls: true });
    expect(formFromSource({ id: "d", connection: { type: "tcp", host: "h", port: 1 } }).secrets).toEqual({ password: "", ca: null, cert: null, key: null, clear: [] });
  });
});
