#!/usr/bin/python3
"""A BLE peripheral for tests/vm_ble.rs, served by the real bluetoothd in the QEMU guest.

Registers, on every adapter given on the command line (`hci1` …), a GATT application with
one service (FFE0, like an HM-10 serial module) that has
  - FFE1: read + notify. Once subscribed it notifies a 4-byte little-endian counter every
    100 ms, and `echo:` + whatever was written to FFE2;
  - FFE2: write + write without response.
and an LE advertisement with the service and the local name. Prints `ready` when BlueZ
has accepted all of it, and one line per event (`subscribed`, `written <hex>`, …) after.

In btvirt's emulated radio an adapter hears no advertisements during a discovery round that
began while it was advertising, and which adapter the central under test scans with is not
known in advance. So nothing advertises at first; when an adapter starts discovering, it
stops advertising and all the others start (and keep on after the discovery ends, so the
central can connect). A central whose adapter was advertising hears nothing in its first
round, but BlueZ starts another a few seconds later, and that one hears the others.

Needs python3-dbus and python3-gi (Debian packages); BlueZ's D-Bus API, version 5.66.
"""

import sys

import dbus
import dbus.exceptions
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUEZ = "org.bluez"
DBUS_OM = "org.freedesktop.DBus.ObjectManager"
DBUS_PROPS = "org.freedesktop.DBus.Properties"
GATT_MANAGER = "org.bluez.GattManager1"
ADV_MANAGER = "org.bluez.LEAdvertisingManager1"
GATT_SERVICE = "org.bluez.GattService1"
GATT_CHRC = "org.bluez.GattCharacteristic1"
ADVERTISEMENT = "org.bluez.LEAdvertisement1"

NAME = "Sextant VM Sensor"
SERVICE = "0000ffe0-0000-1000-8000-00805f9b34fb"
NOTIFY = "0000ffe1-0000-1000-8000-00805f9b34fb"
WRITE = "0000ffe2-0000-1000-8000-00805f9b34fb"


def say(*words):
    print(*words, flush=True)


class InvalidArgs(dbus.exceptions.DBusException):
    _dbus_error_name = "org.freedesktop.DBus.Error.InvalidArgs"


class Object(dbus.service.Object):
    """A D-Bus object with fixed properties on one interface."""

    interface = ""

    def __init__(self, bus, path):
        self.path = path
        super().__init__(bus, path)

    def properties(self):
        return {}

    def managed(self):
        return {self.interface: self.properties()}

    @dbus.service.method(DBUS_PROPS, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface != self.interface:
            raise InvalidArgs()
        return self.properties()


class Application(dbus.service.Object):
    def __init__(self, bus, path, objects):
        self.path = path
        self.objects = objects
        super().__init__(bus, path)

    @dbus.service.method(DBUS_OM, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        return {dbus.ObjectPath(o.path): o.managed() for o in self.objects}


class Service(Object):
    interface = GATT_SERVICE

    def __init__(self, bus, path, characteristics):
        super().__init__(bus, path)
        self.characteristics = characteristics

    def properties(self):
        return {
            "UUID": SERVICE,
            "Primary": dbus.Boolean(True),
            "Characteristics": dbus.Array([dbus.ObjectPath(c) for c in self.characteristics], signature="o"),
        }


class Characteristic(Object):
    interface = GATT_CHRC

    def __init__(self, bus, path, service, uuid, flags):
        super().__init__(bus, path)
        self.service = service
        self.uuid = uuid
        self.flags = flags
        self.value = b""

    def properties(self):
        return {
            "UUID": self.uuid,
            "Service": dbus.ObjectPath(self.service),
            "Flags": dbus.Array(self.flags, signature="s"),
            "Descriptors": dbus.Array([], signature="o"),
        }

    @dbus.service.method(GATT_CHRC, in_signature="a{sv}", out_signature="ay")
    def ReadValue(self, options):
        return dbus.Array(self.value, signature="y")

    @dbus.service.signal(DBUS_PROPS, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass


class Notifier(Characteristic):
    def __init__(self, bus, path, service):
        super().__init__(bus, path, service, NOTIFY, ["read", "notify"])
        self.counter = 0
        self.timer = None

    def notify(self, value):
        self.value = bytes(value)
        self.PropertiesChanged(GATT_CHRC, {"Value": dbus.Array(self.value, signature="y")}, [])

    def tick(self):
        self.notify(self.counter.to_bytes(4, "little"))
        self.counter += 1
        return True

    @dbus.service.method(GATT_CHRC)
    def StartNotify(self):
        if self.timer is None:
            say("subscribed")
            self.timer = GLib.timeout_add(100, self.tick)

    @dbus.service.method(GATT_CHRC)
    def StopNotify(self):
        if self.timer is not None:
            say("unsubscribed")
            GLib.source_remove(self.timer)
            self.timer = None


class Writable(Characteristic):
    def __init__(self, bus, path, service, notifier):
        super().__init__(bus, path, service, WRITE, ["write", "write-without-response"])
        self.notifier = notifier

    @dbus.service.method(GATT_CHRC, in_signature="aya{sv}")
    def WriteValue(self, value, options):
        self.value = bytes(value)
        say("written", self.value.hex())
        self.notifier.notify(b"echo:" + self.value)


class Advertisement(Object):
    interface = ADVERTISEMENT

    def properties(self):
        return {
            "Type": "peripheral",
            "ServiceUUIDs": dbus.Array(["ffe0"], signature="s"),
            "LocalName": NAME,
        }

    @dbus.service.method(ADVERTISEMENT)
    def Release(self):
        say("advertisement released")


class Advertiser:
    """Advertises on every adapter but the one that last started discovering."""

    def __init__(self, bus, adapters):
        self.bus = bus
        self.adapters = adapters
        self.want = {a: False for a in adapters}
        self.registered = {a: False for a in adapters}
        self.busy = set()
        self.ads = {a: Advertisement(bus, "/sextant/%s/advertisement" % a) for a in adapters}
        bus.add_signal_receiver(
            self.changed,
            dbus_interface=DBUS_PROPS,
            signal_name="PropertiesChanged",
            arg0="org.bluez.Adapter1",
            path_keyword="path",
        )

    def changed(self, interface, changed, invalidated, path=None):
        name = str(path).rsplit("/", 1)[-1]
        if name in self.want and "Discovering" in changed:
            discovering = bool(changed["Discovering"])
            say(name, "discovering" if discovering else "not discovering")
            if discovering:
                for a in self.adapters:
                    self.want[a] = a != name
                self.update()

    def update(self):
        for a in self.adapters:
            want = self.want[a]
            if a in self.busy or want == self.registered[a]:
                continue
            self.busy.add(a)
            manager = dbus.Interface(self.bus.get_object(BLUEZ, "/org/bluez/" + a), ADV_MANAGER)
            call = manager.RegisterAdvertisement if want else manager.UnregisterAdvertisement
            args = (self.ads[a].path, {}) if want else (self.ads[a].path,)
            call(*args, reply_handler=self.done(a, want), error_handler=self.failed(a, want))

    def done(self, adapter, registered):
        def reply(*_):
            self.busy.discard(adapter)
            self.registered[adapter] = registered
            say(adapter, "advertising" if registered else "silent")
            self.update()

        return reply

    def failed(self, adapter, registered):
        def error(e):
            self.busy.discard(adapter)
            say("FAILED", adapter, "advertising" if registered else "silent", e)
            GLib.timeout_add(500, lambda: self.update() and False)

        return error


def main():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    loop = GLib.MainLoop()
    adapters = sys.argv[1:] or ["hci0", "hci1"]
    pending = {"gatt": len(adapters)}

    def registered(name):
        def reply(*_):
            say("registered", name, "gatt")
            pending["gatt"] -= 1
            if pending["gatt"] == 0:
                say("ready")

        return reply

    def failed(name):
        def error(e):
            say("FAILED", name, "gatt", e)
            loop.quit()
            sys.exit(1)

        return error

    for name in adapters:
        adapter = bus.get_object(BLUEZ, "/org/bluez/" + name)
        props = dbus.Interface(adapter, DBUS_PROPS)
        props.Set("org.bluez.Adapter1", "Powered", dbus.Boolean(True))
        # The GAP device name, which a central reads once connected, as a real device has it.
        props.Set("org.bluez.Adapter1", "Alias", NAME)
        root = "/sextant/%s" % name
        service = root + "/service0"
        notifier = Notifier(bus, service + "/char0", service)
        writable = Writable(bus, service + "/char1", service, notifier)
        app = Application(bus, root, [Service(bus, service, [notifier.path, writable.path]), notifier, writable])
        dbus.Interface(adapter, GATT_MANAGER).RegisterApplication(
            app.path, {}, reply_handler=registered(name), error_handler=failed(name)
        )
    Advertiser(bus, adapters)
    loop.run()


if __name__ == "__main__":
    main()
