"""A BlueZ mock with Bluetooth LE devices, for the BLE device tests.

Runs python-dbusmock's `bluez5` template in this process, on the bus that
DBUS_SYSTEM_BUS_ADDRESS names (the tests point it at a private dbus-daemon, never the
machine's system bus), and adds to it:

    adapter hci0
    "Sextant Test Sensor"  C0:FF:EE:00:00:01, advertises the Nordic UART service (NUS)
        GATT, created on Connect and removed on disconnect as BlueZ does:
        service 1800 Generic Access
            char 2a00 Device Name          read
        service 6e400001-b5a3-f393-e0a9-e50e24dcca9e (NUS)
            char 6e400003-… TX             notify; values come from the `notify` command
                desc 2902 CCCD
            char 6e400002-… RX             write, write-without-response; records writes
    "Heart Rate Strap"     11:22:33:44:55:66, advertises 180d; no GATT

Devices appear (InterfacesAdded) shortly after the first StartDiscovery, as a real scan
finds them.

Control: one command per line on stdin, one reply line on stdout.

    notify N    send N notifications on TX, each the next value of a counter that starts
                at 1, as decimal text plus a newline  -> "ok N", or "error not-notifying"
    written     every value written to RX so far    -> "written HEX:TYPE HEX:TYPE ..."
                (TYPE is the `type` write option: request, command, or - when absent)
    drop        the device disconnects by itself (out of range, powered off)  -> "ok"
    state       -> "state connected=0|1 notifying=0|1 connects=N"

The first line printed is "ready" once everything is on the bus. The mock exits when
stdin closes, so a test that dies takes it along.

Options:
    --no-adapter    no adapter at all (the "no Bluetooth adapter" case)
    --log PATH      write python-dbusmock's call log there (default: discarded)

Needs python3-dbusmock (Debian/Ubuntu package `python3-dbusmock`) and PyGObject.
"""

import argparse
import os
import sys
from xml.etree import ElementTree

import dbus
import dbus.mainloop.glib
import dbus.service
from dbusmock import OBJECT_MANAGER_IFACE, mockobject
from gi.repository import GLib

DEVICE_IFACE = "org.bluez.Device1"
ADAPTER_IFACE = "org.bluez.Adapter1"
SERVICE_IFACE = "org.bluez.GattService1"
CHAR_IFACE = "org.bluez.GattCharacteristic1"
DESC_IFACE = "org.bluez.GattDescriptor1"

SENSOR_NAME = "Sextant Test Sensor"
SENSOR_ADDRESS = "C0:FF:EE:00:00:01"
NUS = "6e400001-b5a3-f393-e0a9-e50e24dcca9e"
NUS_RX = "6e400002-b5a3-f393-e0a9-e50e24dcca9e"
NUS_TX = "6e400003-b5a3-f393-e0a9-e50e24dcca9e"
GENERIC_ACCESS = "00001800-0000-1000-8000-00805f9b34fb"
DEVICE_NAME_CHAR = "00002a00-0000-1000-8000-00805f9b34fb"
CCCD = "00002902-0000-1000-8000-00805f9b34fb"
OTHER_NAME = "Heart Rate Strap"
OTHER_ADDRESS = "11:22:33:44:55:66"
HEART_RATE = "0000180d-0000-1000-8000-00805f9b34fb"

# How long after StartDiscovery the devices "are heard", and after Connect the services
# resolve: both are asynchronous in BlueZ, and clients must wait for the signals.
DISCOVERY_DELAY_MS = 150
RESOLVE_DELAY_MS = 50


def regroup_introspection(xml):
    """Puts each node's interfaces before its child nodes, and groups each interface's
    methods, signals and properties.

    python-dbusmock appends an interface that has only properties (a GATT service) after
    the child <node> elements, and btleplug's D-Bus layer (bluez-async, through
    serde-xml-rs) refuses elements of one kind that are not contiguous ("duplicate field
    `interface`"). D-Bus gives the order no meaning, so grouping changes nothing else.
    """
    root = ElementTree.fromstring(xml)
    kinds = ["interface", "node", "method", "signal", "property", "annotation"]

    def rank(element):
        return kinds.index(element.tag) if element.tag in kinds else len(kinds)

    for element in [root, *root.iter("interface")]:
        children = sorted(list(element), key=rank)  # stable: keeps order within a kind
        for child in list(element):
            element.remove(child)
        element.extend(children)
    doctype = (
        '<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"\n'
        ' "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">\n'
    )
    return doctype + ElementTree.tostring(root, encoding="unicode")


_introspect = mockobject.DBusMockObject.Introspect


@dbus.service.method(
    dbus.INTROSPECTABLE_IFACE,
    in_signature="",
    out_signature="s",
    path_keyword="object_path",
    connection_keyword="connection",
)
def _grouped_introspect(self, object_path, connection):
    return regroup_introspection(_introspect(self, object_path, connection))


mockobject.DBusMockObject.Introspect = _grouped_introspect


def variant(value):
    """Wraps a property value the way python-dbusmock's templates store them."""
    if isinstance(value, bool):
        return dbus.Boolean(value, variant_level=1)
    return value


def byte_array(data):
    return dbus.Array([dbus.Byte(b) for b in data], signature="y", variant_level=1)


def emit_changed(obj, interface, changes):
    obj.EmitSignal(
        dbus.PROPERTIES_IFACE,
        "PropertiesChanged",
        "sa{sv}as",
        [interface, changes, dbus.Array([], signature="s")],
    )


class Sensor:
    """The test sensor's connection state, GATT objects, counter and write log."""

    def __init__(self, root, device_path):
        self.root = root
        self.path = device_path
        self.connected = False
        self.connects = 0
        self.counter = 0
        self.written = []
        self.gatt_paths = []
        self.tx_path = None
        self.rx_path = None

    @property
    def device(self):
        return mockobject.objects[self.path]

    def notifying(self):
        if self.tx_path not in mockobject.objects:
            return False
        return bool(mockobject.objects[self.tx_path].props[CHAR_IFACE]["Notifying"])

    # --- GATT database -------------------------------------------------------------

    def add_object(self, path, interface, props, methods):
        self.root.AddObject(path, interface, props, methods)
        self.gatt_paths.append(path)
        self.root.EmitSignal(
            OBJECT_MANAGER_IFACE,
            "InterfacesAdded",
            "oa{sa{sv}}",
            [dbus.ObjectPath(path), {interface: props}],
        )

    def add_service(self, handle, uuid):
        path = f"{self.path}/service{handle:04x}"
        self.add_object(
            path,
            SERVICE_IFACE,
            {
                "UUID": dbus.String(uuid, variant_level=1),
                "Device": dbus.ObjectPath(self.path, variant_level=1),
                "Primary": dbus.Boolean(True, variant_level=1),
                "Includes": dbus.Array([], signature="o", variant_level=1),
            },
            [],
        )
        return path

    def add_characteristic(self, service_path, handle, uuid, flags, value=b""):
        path = f"{service_path}/char{handle:04x}"
        sensor = self

        def read_value(obj, _options):
            return obj.props[CHAR_IFACE]["Value"]

        def write_value(obj, value, options):
            if not sensor.connected:
                raise dbus.exceptions.DBusException(
                    "Not connected", name="org.bluez.Error.NotConnected"
                )
            sensor.written.append((bytes(value), str(options.get("type", "-"))))

        def start_notify(obj):
            if not sensor.connected:
                raise dbus.exceptions.DBusException(
                    "Not connected", name="org.bluez.Error.NotConnected"
                )
            obj.props[CHAR_IFACE]["Notifying"] = dbus.Boolean(True, variant_level=1)
            emit_changed(obj, CHAR_IFACE, {"Notifying": dbus.Boolean(True, variant_level=1)})

        def stop_notify(obj):
            obj.props[CHAR_IFACE]["Notifying"] = dbus.Boolean(False, variant_level=1)
            emit_changed(obj, CHAR_IFACE, {"Notifying": dbus.Boolean(False, variant_level=1)})

        self.add_object(
            path,
            CHAR_IFACE,
            {
                "UUID": dbus.String(uuid, variant_level=1),
                "Service": dbus.ObjectPath(service_path, variant_level=1),
                "Value": byte_array(value),
                "Notifying": dbus.Boolean(False, variant_level=1),
                "Flags": dbus.Array(flags, signature="s", variant_level=1),
                "MTU": dbus.UInt16(247, variant_level=1),
            },
            [
                ("ReadValue", "a{sv}", "ay", read_value),
                ("WriteValue", "aya{sv}", "", write_value),
                ("StartNotify", "", "", start_notify),
                ("StopNotify", "", "", stop_notify),
            ],
        )
        return path

    def add_descriptor(self, char_path, handle, uuid):
        path = f"{char_path}/desc{handle:04x}"
        self.add_object(
            path,
            DESC_IFACE,
            {
                "UUID": dbus.String(uuid, variant_level=1),
                "Characteristic": dbus.ObjectPath(char_path, variant_level=1),
                "Value": byte_array(b""),
                "Flags": dbus.Array([], signature="s", variant_level=1),
            },
            [("ReadValue", "a{sv}", "ay", lambda obj, _options: byte_array(b"\x00\x00"))],
        )

    def build_gatt(self):
        # Handles as a real device would number them; BlueZ names objects after them.
        ga = self.add_service(0x0001, GENERIC_ACCESS)
        self.add_characteristic(ga, 0x0002, DEVICE_NAME_CHAR, ["read"], SENSOR_NAME.encode())
        nus = self.add_service(0x000C, NUS)
        self.rx_path = self.add_characteristic(
            nus, 0x000D, NUS_RX, ["write", "write-without-response"]
        )
        self.tx_path = self.add_characteristic(nus, 0x000F, NUS_TX, ["notify"])
        self.add_descriptor(self.tx_path, 0x0011, CCCD)

    def remove_gatt(self):
        # Children first, as BlueZ does.
        for path in reversed(self.gatt_paths):
            interface = next(iter(mockobject.objects[path].props))
            self.root.RemoveObject(path)
            self.root.EmitSignal(
                OBJECT_MANAGER_IFACE,
                "InterfacesRemoved",
                "oas",
                [dbus.ObjectPath(path), dbus.Array([interface], signature="s")],
            )
        self.gatt_paths = []
        self.tx_path = None
        self.rx_path = None

    # --- connection ------------------------------------------------------------------

    def set_device(self, **changes):
        device = self.device
        wrapped = {name: variant(value) for name, value in changes.items()}
        for name, value in wrapped.items():
            device.props[DEVICE_IFACE][name] = value
        emit_changed(device, DEVICE_IFACE, wrapped)

    def connect(self, _device):
        if self.connected:
            raise dbus.exceptions.DBusException(
                "Already Connected", name="org.bluez.Error.AlreadyConnected"
            )
        self.connected = True
        self.connects += 1
        self.build_gatt()
        self.set_device(Connected=True)

        def resolved():
            if self.connected:
                self.set_device(ServicesResolved=True)
            return False

        GLib.timeout_add(RESOLVE_DELAY_MS, resolved)

    def disconnect(self, _device=None):
        if not self.connected:
            raise dbus.exceptions.DBusException(
                "Not Connected", name="org.bluez.Error.NotConnected"
            )
        self.connected = False
        self.set_device(ServicesResolved=False)
        self.set_device(Connected=False)
        self.remove_gatt()

    def notify(self, count):
        if not self.connected or not self.notifying():
            return "error not-notifying"
        tx = mockobject.objects[self.tx_path]
        for _ in range(count):
            self.counter += 1
            value = byte_array(f"{self.counter}\n".encode())
            tx.props[CHAR_IFACE]["Value"] = value
            emit_changed(tx, CHAR_IFACE, {"Value": value})
        return f"ok {count}"


def add_device(root, address, name, services):
    path = root.AddDevice("hci0", address, name)
    device = mockobject.objects[path]
    # What the advertisement carried: service UUIDs and signal strength.
    device.UpdateProperties(
        DEVICE_IFACE,
        {
            "UUIDs": dbus.Array(services, signature="s", variant_level=1),
            "RSSI": dbus.Int16(-52 if address == SENSOR_ADDRESS else -71, variant_level=1),
        },
    )
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-adapter", action="store_true")
    parser.add_argument("--log", default=os.devnull)
    args = parser.parse_args()

    if not os.environ.get("DBUS_SYSTEM_BUS_ADDRESS"):
        sys.exit("DBUS_SYSTEM_BUS_ADDRESS is not set: point it at a private test bus")

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(os.environ["DBUS_SYSTEM_BUS_ADDRESS"])
    bus_name = dbus.service.BusName(
        "org.bluez", bus, allow_replacement=True, replace_existing=True, do_not_queue=True
    )
    root = mockobject.DBusMockObject(bus_name, "/", OBJECT_MANAGER_IFACE, {}, args.log, True)
    mockobject.objects["/"] = root
    root.AddTemplate("bluez5", None)

    loop = GLib.MainLoop()
    state = {"sensor": None}

    if not args.no_adapter:
        adapter_path = root.AddAdapter("hci0", "sextant-test")
        adapter = mockobject.objects[adapter_path]

        def appear():
            if state["sensor"] is not None:
                return False
            sensor_path = add_device(root, SENSOR_ADDRESS, SENSOR_NAME, [NUS])
            sensor = Sensor(root, sensor_path)
            device = mockobject.objects[sensor_path]
            # python-dbusmock calls plain functions only (not bound methods).
            device.AddMethod(DEVICE_IFACE, "Connect", "", "", lambda obj: sensor.connect(obj))
            device.AddMethod(
                DEVICE_IFACE, "Disconnect", "", "", lambda obj: sensor.disconnect(obj)
            )
            state["sensor"] = sensor
            add_device(root, OTHER_ADDRESS, OTHER_NAME, [HEART_RATE])
            return False

        # The template's own Start/StopDiscovery fail unless SetDiscoveryFilter came first.
        def set_discovering(obj, discovering):
            obj.props[ADAPTER_IFACE]["Discovering"] = dbus.Boolean(discovering, variant_level=1)
            emit_changed(
                obj, ADAPTER_IFACE, {"Discovering": dbus.Boolean(discovering, variant_level=1)}
            )

        def start_discovery(obj):
            set_discovering(obj, True)
            GLib.timeout_add(DISCOVERY_DELAY_MS, appear)

        adapter.AddMethod(ADAPTER_IFACE, "StartDiscovery", "", "", start_discovery)
        adapter.AddMethod(
            ADAPTER_IFACE, "StopDiscovery", "", "", lambda obj: set_discovering(obj, False)
        )

    def command(line):
        words = line.split()
        sensor = state["sensor"]
        if not words:
            return "error empty command"
        if words[0] == "state":
            if sensor is None:
                return "state connected=0 notifying=0 connects=0"
            return (
                f"state connected={int(sensor.connected)} "
                f"notifying={int(sensor.notifying())} connects={sensor.connects}"
            )
        if sensor is None:
            return "error no device yet: nothing has scanned"
        if words[0] == "notify" and len(words) == 2 and words[1].isdigit():
            return sensor.notify(int(words[1]))
        if words[0] == "written":
            return " ".join(["written"] + [f"{v.hex()}:{t}" for v, t in sensor.written])
        if words[0] == "drop":
            if not sensor.connected:
                return "error not connected"
            sensor.disconnect()
            return "ok"
        return f"error unknown command: {line.strip()}"

    def on_stdin(_fd, _condition):
        line = sys.stdin.readline()
        if not line:
            loop.quit()
            return False
        try:
            reply = command(line)
        except Exception as e:  # a broken command must not kill the mock mid-test
            reply = f"error {type(e).__name__}: {e}"
        print(reply, flush=True)
        return True

    GLib.io_add_watch(sys.stdin.fileno(), GLib.PRIORITY_DEFAULT, GLib.IO_IN | GLib.IO_HUP, on_stdin)
    # Quit with the bus, too.
    bus.add_signal_receiver(
        lambda *_: loop.quit(),
        signal_name="Disconnected",
        path="/org/freedesktop/DBus/Local",
        dbus_interface="org.freedesktop.DBus.Local",
    )
    print("ready", flush=True)
    loop.run()


if __name__ == "__main__":
    main()
