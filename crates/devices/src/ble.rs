//! Bluetooth Low Energy (GATT) sources through `btleplug`: BlueZ over D-Bus on Linux,
//! CoreBluetooth on macOS, WinRT on Windows. One notification is one chunk; writes go to
//! an optional write characteristic.
//!
//! Opening scans for the device by name or address, connects, resolves its GATT services,
//! checks the configured service and characteristics (errors list what the device does
//! offer), and subscribes. Reconnection is the runner's job: a device that disconnects
//! ends the link with a transient error, and the next open scans and subscribes afresh.
//! [`scan`] lists nearby devices for the UI's device picker.
//!
//! Every source and every scan share one btleplug manager, that is one connection to
//! BlueZ, for two reasons. btleplug's D-Bus I/O task lives as long as the runtime it was
//! started on, so a manager per open would leak a connection per reconnect; it therefore
//! runs on a small runtime of its own. And BlueZ keeps one discovery session per D-Bus
//! client: with a shared connection, one scanner stopping would stop everyone's scan, so
//! scans are counted here and discovery stops when the last scanner is done.
//!
//! btleplug's signal streams (bluez-async 0.8) remove their D-Bus match from a task
//! spawned when they are dropped. The connection's dispatcher takes a match out while it
//! delivers a signal to it, so a removal running on another thread at that moment fails,
//! as does one that comes after a signal reached the dropped stream: the task panics and
//! the match rule stays on the bus, which allows a connection 512 of them. Hence every
//! stream is dropped on the Bluetooth runtime's single thread, where the dispatcher runs
//! too; btleplug calls that use a stream internally (connect) run there as well; a link
//! drops its notification stream only once its device has gone quiet; and device searches
//! and disconnect detection poll rather than hold adapter-wide streams, which see every
//! advertisement.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use btleplug::api::bleuuid::{uuid_from_u16, uuid_from_u32, BleUuid};
use btleplug::api::{
    BDAddr, Central as _, CharPropFlags, Characteristic, Manager as _, Peripheral as _,
    PeripheralProperties, ScanFilter, Service, ValueNotification, WriteType,
};
use btleplug::platform::{Adapter, Manager, Peripheral};
use bytes::Bytes;
use futures::{FutureExt, Stream, StreamExt};
use sextant_telemetry::project::BleSettings;
use sextant_telemetry::Timestamp;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::source::{DeviceError, Driver, Link};

/// How long an open scans for the configured device before giving up (and retrying).
pub const DEFAULT_SCAN_TIMEOUT: Duration = Duration::from_secs(10);
/// Longer than a normal LE connection takes, shorter than BlueZ's own 30 s D-Bus timeout,
/// so the user sees our message rather than "no reply".
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// A healthy BlueZ answers in milliseconds; longer means the daemon or the bus is stuck.
const BLUEZ_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a connected link checks that its device is still connected.
const LIVENESS_INTERVAL: Duration = Duration::from_millis(500);
/// How often a device search reads the devices the adapter has heard so far.
const SEARCH_INTERVAL: Duration = Duration::from_millis(500);
/// Quiet time after our own disconnect before the notification stream is dropped.
const SETTLE_QUIET: Duration = Duration::from_millis(100);
/// ATT's largest attribute value; a longer write is split (BlueZ does long writes up to it).
const MAX_WRITE_WITH_RESPONSE: usize = 512;
/// The payload of a write command at the default ATT MTU of 23, the only size every device
/// accepts; btleplug does not report the negotiated MTU.
const MAX_WRITE_WITHOUT_RESPONSE: usize = 20;

/// A BLE setting that cannot work, or a device that does not match the settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BleError {
    #[error(
        "a BLE source needs a device: set its name (as it advertises) or its address (AA:BB:CC:DD:EE:FF)"
    )]
    NoDevice,
    #[error(
        "the {setting} `{value}` is not a BLE UUID: use a 16-bit short form such as `180d` or a full UUID such as `6e400001-b5a3-f393-e0a9-e50e24dcca9e`"
    )]
    BadUuid {
        setting: &'static str,
        value: String,
    },
    #[error(
        "no Bluetooth adapter found: plug one in, or switch Bluetooth on (`rfkill unblock bluetooth`)"
    )]
    NoAdapter,
    #[error(
        "no BLE device {target} was found within {seconds} s: check that it is on, advertising and in range (a device connected to a phone or another app usually stops advertising); {seen}"
    )]
    NotFound {
        target: String,
        seconds: u64,
        seen: String,
    },
    #[error(
        "device `{device}` has no GATT service {service}; it offers: {offered}. Set the service to one of these"
    )]
    NoService {
        device: String,
        service: Uuid,
        offered: String,
    },
    #[error(
        "service {service} of `{device}` has no characteristic {characteristic}; it has: {offered}. Set the {role} characteristic to one of these"
    )]
    NoCharacteristic {
        device: String,
        service: Uuid,
        characteristic: Uuid,
        role: &'static str,
        offered: String,
    },
    #[error(
        "characteristic {characteristic} cannot {action} (it supports: {supports}); set the {role} characteristic to one that can"
    )]
    Unsupported {
        characteristic: Uuid,
        role: &'static str,
        action: &'static str,
        supports: String,
    },
}

impl From<BleError> for DeviceError {
    fn from(e: BleError) -> Self {
        match e {
            // Both can fix themselves: an adapter gets plugged in, a device comes in range.
            BleError::NoAdapter | BleError::NotFound { .. } => {
                DeviceError::transient(e.to_string())
            }
            _ => DeviceError::fatal(e.to_string()),
        }
    }
}

/// Parses a UUID as users write them: `180d`, `0x180D`, `0000180d` or the full form.
pub fn parse_uuid(text: &str) -> Option<Uuid> {
    let t = text.trim();
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    let is_hex = !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit());
    match hex.len() {
        4 if is_hex => u16::from_str_radix(hex, 16).ok().map(uuid_from_u16),
        8 if is_hex => u32::from_str_radix(hex, 16).ok().map(uuid_from_u32),
        _ => Uuid::parse_str(t).ok(),
    }
}

/// A nearby device, for the UI's picker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BleDeviceInfo {
    /// The advertised name, when the device sends one.
    pub name: Option<String>,
    /// `AA:BB:CC:DD:EE:FF` (all zeros on macOS, which hides addresses: use the name there).
    pub address: String,
    /// Signal strength of the last advertisement in dBm; `None` for a device the OS
    /// remembers but did not hear during this scan.
    pub rssi: Option<i16>,
    /// Services the device advertises (usually a subset of what it offers once connected).
    pub services: Vec<Uuid>,
}

/// Scans for `timeout` and lists every device the adapter knows, strongest signal first.
pub async fn scan(timeout: Duration) -> Result<Vec<BleDeviceInfo>, DeviceError> {
    let adapter = adapter().await?;
    let discovery = Discovery::start(&adapter).await?;
    tokio::time::sleep(timeout).await;
    let peripherals = adapter
        .peripherals()
        .await
        .map_err(|e| bluez_error("listing devices", e))?;
    drop(discovery);
    let mut devices = Vec::new();
    for p in peripherals {
        // A device that vanished between listing and reading is simply not listed.
        if let Ok(Some(props)) = p.properties().await {
            devices.push(BleDeviceInfo {
                name: props.local_name,
                address: props.address.to_string(),
                // HCI reports 127 for "RSSI not available".
                rssi: props.rssi.filter(|r| *r != 127),
                services: props.services,
            });
        }
    }
    devices.sort_by(|a, b| {
        b.rssi
            .unwrap_or(i16::MIN)
            .cmp(&a.rssi.unwrap_or(i16::MIN))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.address.cmp(&b.address))
    });
    Ok(devices)
}

/// Which device to connect to: the setting may be a name or an address.
#[derive(Debug, Clone)]
struct Target {
    text: String,
    address: Option<BDAddr>,
}

impl Target {
    fn new(text: &str) -> Target {
        let text = text.trim().to_string();
        // Only the colon form: a 12-hex-digit name must not be taken for an address.
        let address = text
            .contains(':')
            .then(|| text.parse::<BDAddr>().ok())
            .flatten();
        Target { text, address }
    }

    fn matches(&self, props: &PeripheralProperties) -> bool {
        self.address == Some(props.address)
            || props
                .local_name
                .as_deref()
                .is_some_and(|n| n.trim().eq_ignore_ascii_case(&self.text))
    }

    fn describe(&self) -> String {
        match self.address {
            Some(a) => format!("with address {a}"),
            None => format!("named `{}`", self.text),
        }
    }
}

/// Opens one BLE device: see the module documentation.
pub struct BleDriver {
    target: Target,
    service: Uuid,
    notify: Uuid,
    write: Option<Uuid>,
    /// How long each open scans for the device.
    pub scan_timeout: Duration,
    /// The pump task of the previous link, which disconnects the device when the link is
    /// dropped; the next open waits for it so it cannot cut the new connection.
    previous: Option<tokio::task::JoinHandle<()>>,
}

impl BleDriver {
    pub fn new(settings: BleSettings) -> Result<Self, BleError> {
        if settings.device.trim().is_empty() {
            return Err(BleError::NoDevice);
        }
        let uuid = |setting: &'static str, value: &str| {
            parse_uuid(value).ok_or_else(|| BleError::BadUuid {
                setting,
                value: value.to_string(),
            })
        };
        let write = match settings.write_characteristic.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(w) => Some(uuid("write characteristic", w)?),
        };
        Ok(BleDriver {
            target: Target::new(&settings.device),
            service: uuid("service", &settings.service)?,
            notify: uuid("notify characteristic", &settings.notify_characteristic)?,
            write,
            scan_timeout: DEFAULT_SCAN_TIMEOUT,
            previous: None,
        })
    }

    /// Scans until the configured device shows up.
    async fn find(&self, adapter: &Adapter) -> Result<Peripheral, DeviceError> {
        let discovery = Discovery::start(adapter).await?;
        let mut seen: BTreeMap<String, Option<String>> = BTreeMap::new();
        let search = async {
            // The first tick is immediate: a device the OS already knows is found at once.
            let mut poll = tokio::time::interval(SEARCH_INTERVAL);
            loop {
                poll.tick().await;
                let peripherals = adapter
                    .peripherals()
                    .await
                    .map_err(|e| bluez_error("listing devices", e))?;
                for p in peripherals {
                    // Re-read every time: a name often arrives after the device is first heard.
                    if let Ok(Some(props)) = p.properties().await {
                        seen.insert(props.address.to_string(), props.local_name.clone());
                        if self.target.matches(&props) {
                            return Ok(p);
                        }
                    }
                }
            }
        };
        let found = tokio::time::timeout(self.scan_timeout, search).await;
        drop(discovery);
        match found {
            Ok(result) => result,
            Err(_) => Err(BleError::NotFound {
                target: self.target.describe(),
                seconds: self.scan_timeout.as_secs_f64().ceil() as u64,
                seen: describe_seen(&seen),
            }
            .into()),
        }
    }

    /// Resolves the GATT layout, checks the settings against it and subscribes.
    async fn attach(
        &self,
        peripheral: &Peripheral,
        disconnect_on_close: bool,
    ) -> Result<(BleLink, tokio::task::JoinHandle<()>), DeviceError> {
        peripheral
            .discover_services()
            .await
            .map_err(|e| bluez_error("resolving the device's GATT services", e))?;
        let name = device_name(peripheral).await;
        let services = peripheral.services();
        let service = services
            .iter()
            .find(|s| s.uuid == self.service)
            .ok_or_else(|| BleError::NoService {
                device: name.clone(),
                service: self.service,
                offered: list_uuids(services.iter().map(|s| s.uuid)),
            })?;
        let notify = characteristic(service, self.notify, "notify", &name)?;
        if !notify
            .properties
            .intersects(CharPropFlags::NOTIFY | CharPropFlags::INDICATE)
        {
            return Err(BleError::Unsupported {
                characteristic: notify.uuid,
                role: "notify",
                action: "notify",
                supports: describe_flags(notify.properties),
            }
            .into());
        }
        let write = match self.write {
            None => None,
            Some(uuid) => {
                let c = characteristic(service, uuid, "write", &name)?;
                // With response where the device allows it: the write is then confirmed.
                let kind = if c.properties.contains(CharPropFlags::WRITE) {
                    WriteType::WithResponse
                } else if c.properties.contains(CharPropFlags::WRITE_WITHOUT_RESPONSE) {
                    WriteType::WithoutResponse
                } else {
                    return Err(BleError::Unsupported {
                        characteristic: c.uuid,
                        role: "write",
                        action: "be written",
                        supports: describe_flags(c.properties),
                    }
                    .into());
                };
                Some((c, kind))
            }
        };
        // The stream before the subscription, so the first notification is not missed.
        let notifications = peripheral
            .notifications()
            .await
            .map_err(|e| bluez_error("listening for notifications", e))?;
        if let Err(e) = peripheral.subscribe(&notify).await {
            drop_on_bluetooth_thread(notifications);
            return Err(bluez_error("subscribing to the notify characteristic", e));
        }
        let (tx, rx) = mpsc::channel(1024);
        let task = bluetooth_runtime()?.spawn(pump(Pump {
            notifications,
            peripheral: peripheral.clone(),
            uuid: notify.uuid,
            disconnect_on_close,
            tx,
        }));
        Ok((
            BleLink {
                rx,
                peripheral: peripheral.clone(),
                write,
            },
            task,
        ))
    }
}

impl Driver for BleDriver {
    type Link = BleLink;

    fn describe(&self) -> String {
        format!("ble {} service {}", self.target.text, self.service)
    }

    async fn open(&mut self) -> Result<BleLink, DeviceError> {
        if let Some(previous) = self.previous.take() {
            let _ = tokio::time::timeout(BLUEZ_TIMEOUT, previous).await;
        }
        let adapter = adapter().await?;
        let peripheral = self.find(&adapter).await?;
        let already = peripheral.is_connected().await.unwrap_or(false);
        if !already {
            // On the Bluetooth thread: connecting waits on a signal stream.
            let mut connecting = bluetooth_runtime()?.spawn({
                let peripheral = peripheral.clone();
                async move { peripheral.connect().await }
            });
            match tokio::time::timeout(CONNECT_TIMEOUT, &mut connecting).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => return Err(bluez_error("connecting", e)),
                Ok(Err(e)) => return Err(worker_failed(e)),
                Err(_) => {
                    connecting.abort();
                    let _ = peripheral.disconnect().await;
                    return Err(DeviceError::transient(format!(
                        "BLE device {} did not accept a connection within {} s: bring it closer or power-cycle it",
                        self.target.describe(),
                        CONNECT_TIMEOUT.as_secs()
                    )));
                }
            }
        }
        match self.attach(&peripheral, !already).await {
            Ok((link, task)) => {
                self.previous = Some(task);
                Ok(link)
            }
            Err(e) => {
                // Leave a device someone else connected alone.
                if !already {
                    let _ = peripheral.disconnect().await;
                }
                // The bus refuses more match rules on this connection (see the module
                // documentation): start over with a fresh one.
                if e.to_string().contains("LimitsExceeded") {
                    forget_manager().await;
                }
                Err(e)
            }
        }
    }
}

type Delivery = Result<Bytes, String>;

/// An open BLE connection; notifications arrive through a channel fed by a task.
pub struct BleLink {
    rx: mpsc::Receiver<Delivery>,
    peripheral: Peripheral,
    write: Option<(Characteristic, WriteType)>,
}

impl Link for BleLink {
    async fn read(&mut self) -> Result<Option<(Bytes, Option<Timestamp>)>, DeviceError> {
        match self.rx.recv().await {
            Some(Ok(value)) => Ok(Some((value, None))),
            Some(Err(e)) => Err(DeviceError::transient(e)),
            None => Err(DeviceError::transient("the BLE connection ended")),
        }
    }

    async fn write(&mut self, data: Bytes) -> Result<(), DeviceError> {
        let Some((characteristic, kind)) = &self.write else {
            return Err(DeviceError::NotWritable);
        };
        let piece = match kind {
            WriteType::WithResponse => MAX_WRITE_WITH_RESPONSE,
            WriteType::WithoutResponse => MAX_WRITE_WITHOUT_RESPONSE,
        };
        for part in data.chunks(piece) {
            if let Err(e) = self.peripheral.write(characteristic, part, *kind).await {
                // Only a lost connection is worth reconnecting over; a refused write is not.
                return Err(if self.peripheral.is_connected().await.unwrap_or(false) {
                    DeviceError::fatal(format!("the BLE device refused the write: {e}"))
                } else {
                    DeviceError::transient(format!("the BLE device disconnected: {e}"))
                });
            }
        }
        Ok(())
    }
}

struct Pump<N> {
    notifications: N,
    peripheral: Peripheral,
    uuid: Uuid,
    disconnect_on_close: bool,
    tx: mpsc::Sender<Delivery>,
}

/// Forwards notifications until the device disconnects or the link is dropped.
async fn pump<N>(mut p: Pump<N>)
where
    N: Stream<Item = ValueNotification> + Send + Unpin,
{
    let mut liveness = tokio::time::interval(LIVENESS_INTERVAL);
    liveness.tick().await;
    let lost = loop {
        tokio::select! {
            // Notifications first: those sent before a disconnect are still delivered.
            biased;
            n = p.notifications.next() => match n {
                Some(n) if n.uuid == p.uuid => {
                    if p.tx.send(Ok(Bytes::from(n.value))).await.is_err() {
                        break None;
                    }
                }
                Some(_) => {}
                None => break Some("the BLE notification stream ended"),
            },
            _ = liveness.tick() => {
                // An error means the device object is gone, which is a disconnect too.
                if !p.peripheral.is_connected().await.unwrap_or(false) {
                    break Some("the BLE device disconnected");
                }
            }
            // The link was dropped (source closed or replaced).
            _ = p.tx.closed() => break None,
        }
    };
    match lost {
        Some(reason) => {
            // Whatever was already received still counts.
            while let Some(Some(n)) = p.notifications.next().now_or_never() {
                if n.uuid == p.uuid && p.tx.send(Ok(Bytes::from(n.value))).await.is_err() {
                    return;
                }
            }
            let _ = p.tx.send(Err(reason.to_string())).await;
        }
        None => {
            if p.disconnect_on_close {
                let _ = p.peripheral.disconnect().await;
                // Let the disconnect's own signals pass before the stream is dropped (see
                // the module documentation), but never wait long.
                let settle = async {
                    while let Ok(Some(_)) =
                        tokio::time::timeout(SETTLE_QUIET, p.notifications.next()).await
                    {
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(1), settle).await;
            }
        }
    }
}

fn characteristic(
    service: &Service,
    uuid: Uuid,
    role: &'static str,
    device: &str,
) -> Result<Characteristic, BleError> {
    service
        .characteristics
        .iter()
        .find(|c| c.uuid == uuid)
        .cloned()
        .ok_or_else(|| BleError::NoCharacteristic {
            device: device.to_string(),
            service: service.uuid,
            characteristic: uuid,
            role,
            offered: service
                .characteristics
                .iter()
                .map(|c| format!("{} ({})", c.uuid, describe_flags(c.properties)))
                .collect::<Vec<_>>()
                .join(", "),
        })
}

async fn device_name(peripheral: &Peripheral) -> String {
    match peripheral.properties().await {
        Ok(Some(PeripheralProperties {
            local_name: Some(name),
            ..
        })) => name,
        _ => peripheral.address().to_string(),
    }
}

fn describe_flags(flags: CharPropFlags) -> String {
    let names = [
        (CharPropFlags::READ, "read"),
        (CharPropFlags::WRITE, "write"),
        (
            CharPropFlags::WRITE_WITHOUT_RESPONSE,
            "write without response",
        ),
        (CharPropFlags::NOTIFY, "notify"),
        (CharPropFlags::INDICATE, "indicate"),
        (CharPropFlags::BROADCAST, "broadcast"),
        (CharPropFlags::AUTHENTICATED_SIGNED_WRITES, "signed write"),
    ];
    let list: Vec<&str> = names
        .iter()
        .filter(|(f, _)| flags.contains(*f))
        .map(|(_, n)| *n)
        .collect();
    if list.is_empty() {
        "nothing".into()
    } else {
        list.join(", ")
    }
}

/// `6e400001-… (Nordic UART), 00001800-… (Generic Access)`: full UUIDs, so they can be
/// pasted into the settings, with the name of the well-known ones.
fn list_uuids(uuids: impl Iterator<Item = Uuid>) -> String {
    let mut list: Vec<String> = uuids
        .map(|u| match well_known(u) {
            Some(name) => format!("{u} ({name}, short {})", u.to_short_string()),
            None => u.to_string(),
        })
        .collect();
    list.sort();
    if list.is_empty() {
        "no services at all".into()
    } else {
        list.join(", ")
    }
}

fn well_known(uuid: Uuid) -> Option<&'static str> {
    if uuid == Uuid::from_u128(0x6e400001_b5a3_f393_e0a9_e50e24dcca9e) {
        return Some("Nordic UART");
    }
    Some(match uuid.to_ble_u16()? {
        0x1800 => "Generic Access",
        0x1801 => "Generic Attribute",
        0x180a => "Device Information",
        0x180d => "Heart Rate",
        0x180f => "Battery",
        0x1816 => "Cycling Speed and Cadence",
        0x1818 => "Cycling Power",
        0x181a => "Environmental Sensing",
        0xffe0 => "HM-10 serial",
        _ => return None,
    })
}

fn describe_seen(seen: &BTreeMap<String, Option<String>>) -> String {
    if seen.is_empty() {
        return "no devices were seen at all".into();
    }
    let list: Vec<String> = seen
        .iter()
        .map(|(address, name)| match name {
            Some(n) => format!("`{n}` ({address})"),
            None => format!("{address} (no name)"),
        })
        .collect();
    format!("devices seen: {}", list.join(", "))
}

/// A btleplug failure talking to the OS Bluetooth service, with the fix where we know it.
fn bluez_error(what: &str, e: btleplug::Error) -> DeviceError {
    let text = e.to_string();
    if matches!(e, btleplug::Error::PermissionDenied) || text.contains("AccessDenied") {
        DeviceError::fatal(format!(
            "{what}: permission denied by the Bluetooth service: add your user to the `bluetooth` group and log in again ({text})"
        ))
    } else if text.contains("ServiceUnknown") || text.contains("NameHasNoOwner") {
        DeviceError::transient(format!(
            "{what}: the Bluetooth service (bluetoothd) is not running: start it, e.g. `systemctl start bluetooth`"
        ))
    } else if text.contains("NotReady") || text.contains("Blocked") {
        DeviceError::transient(format!(
            "{what}: the Bluetooth adapter is off or blocked: switch Bluetooth on (`rfkill unblock bluetooth`) ({text})"
        ))
    } else {
        DeviceError::transient(format!("BLE {what} failed: {text}"))
    }
}

/// The runtime btleplug's D-Bus connection task runs on: it must outlive any caller's
/// runtime (a test's, a short-lived command's), or the shared connection would die with it.
fn bluetooth_runtime() -> Result<&'static tokio::runtime::Handle, DeviceError> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Handle, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name("sextant-bluetooth".into())
                .spawn(move || runtime.block_on(std::future::pending::<()>()))
                .map_err(|e| e.to_string())?;
            Ok(handle)
        })
        .as_ref()
        .map_err(|e| DeviceError::fatal(format!("cannot start the Bluetooth worker thread: {e}")))
}

fn worker_failed(e: tokio::task::JoinError) -> DeviceError {
    DeviceError::fatal(format!("the Bluetooth worker thread failed: {e}"))
}

/// Drops a btleplug stream where dropping it is safe (see the module documentation).
fn drop_on_bluetooth_thread<T: Send + 'static>(value: T) {
    match bluetooth_runtime() {
        Ok(runtime) => {
            runtime.spawn(async move { drop(value) });
        }
        Err(_) => drop(value),
    }
}

static MANAGER: tokio::sync::Mutex<Option<Manager>> = tokio::sync::Mutex::const_new(None);

async fn manager() -> Result<Manager, DeviceError> {
    let mut slot = MANAGER.lock().await;
    if let Some(m) = slot.as_ref() {
        return Ok(m.clone());
    }
    let manager = bluetooth_runtime()?
        .spawn(Manager::new())
        .await
        .map_err(worker_failed)?
        .map_err(|e| {
            DeviceError::transient(format!(
                "cannot reach the Bluetooth service over the system D-Bus: {e}"
            ))
        })?;
    *slot = Some(manager.clone());
    Ok(manager)
}

async fn forget_manager() {
    *MANAGER.lock().await = None;
}

/// The first adapter by name (BlueZ's `hci0` on a typical machine). btleplug lists
/// adapters in no fixed order, so sort: with two adapters every (re)connect must use the same.
async fn adapter() -> Result<Adapter, DeviceError> {
    let manager = manager().await?;
    match tokio::time::timeout(BLUEZ_TIMEOUT, manager.adapters()).await {
        Ok(Ok(adapters)) => {
            let mut named = Vec::with_capacity(adapters.len());
            for a in adapters {
                let info = a.adapter_info().await.unwrap_or_default();
                named.push((info, a));
            }
            named.sort_by(|x, y| x.0.cmp(&y.0));
            named
                .into_iter()
                .next()
                .map(|(_, a)| a)
                .ok_or_else(|| BleError::NoAdapter.into())
        }
        Ok(Err(e)) => Err(bluez_error("listing Bluetooth adapters", e)),
        Err(_) => {
            // A connection that stopped answering is replaced on the next attempt.
            forget_manager().await;
            Err(DeviceError::transient(format!(
                "the Bluetooth service did not answer within {} s: is bluetoothd running?",
                BLUEZ_TIMEOUT.as_secs()
            )))
        }
    }
}

/// Scanners currently needing discovery on the shared connection.
static SCANNERS: Mutex<usize> = Mutex::new(0);

/// One scanner's share of the adapter's discovery; discovery stops when the last is dropped.
struct Discovery {
    adapter: Adapter,
}

impl Discovery {
    async fn start(adapter: &Adapter) -> Result<Discovery, DeviceError> {
        let first = {
            let mut n = SCANNERS.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            *n == 1
        };
        // Dropping the guard on failure gives the count back.
        let discovery = Discovery {
            adapter: adapter.clone(),
        };
        if first {
            adapter
                .start_scan(ScanFilter::default())
                .await
                .map_err(|e| bluez_error("starting a scan", e))?;
        }
        Ok(discovery)
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        let last = {
            let mut n = SCANNERS.lock().unwrap_or_else(|e| e.into_inner());
            *n = n.saturating_sub(1);
            *n == 0
        };
        if last {
            // Drop cannot wait; the Bluetooth runtime outlives whichever runtime we are on.
            if let Ok(runtime) = bluetooth_runtime() {
                let adapter = self.adapter.clone();
                runtime.spawn(async move {
                    let _ = adapter.stop_scan().await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(device: &str, service: &str, notify: &str, write: Option<&str>) -> BleSettings {
        BleSettings {
            device: device.into(),
            service: service.into(),
            notify_characteristic: notify.into(),
            write_characteristic: write.map(Into::into),
        }
    }

    #[test]
    fn uuids_in_every_usual_form() {
        let hr = Uuid::parse_str("0000180d-0000-1000-8000-00805f9b34fb").unwrap();
        for form in [
            "180d",
            "0x180D",
            "0000180d",
            " 180D ",
            "0000180D-0000-1000-8000-00805F9B34FB",
        ] {
            assert_eq!(parse_uuid(form), Some(hr), "{form}");
        }
        assert_eq!(
            parse_uuid("6e400001-b5a3-f393-e0a9-e50e24dcca9e"),
            Some(Uuid::from_u128(0x6e400001_b5a3_f393_e0a9_e50e24dcca9e))
        );
        for bad in ["", "18x0", "180", "12345", "not-a-uuid"] {
            assert_eq!(parse_uuid(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_settings_say_which_setting_and_how_to_fix_it() {
        let e = BleDriver::new(settings(" ", "180d", "2a37", None)).err();
        assert_eq!(e, Some(BleError::NoDevice));
        let e = BleDriver::new(settings("hr", "heart", "2a37", None))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("service `heart`") && e.contains("180d"), "{e}");
        let e = BleDriver::new(settings("hr", "180d", "2a37", Some("zz")))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("write characteristic `zz`"), "{e}");
        // An empty write characteristic means none.
        assert!(BleDriver::new(settings("hr", "180d", "2a37", Some(""))).is_ok());
    }

    #[test]
    fn targets_match_by_address_or_name() {
        let props = PeripheralProperties {
            address: "C0:FF:EE:00:00:01".parse().unwrap(),
            local_name: Some("Sensor One".into()),
            ..PeripheralProperties::default()
        };
        for t in ["c0:ff:ee:00:00:01", "Sensor One", "sensor one"] {
            assert!(Target::new(t).matches(&props), "{t}");
        }
        for t in ["C0:FF:EE:00:00:02", "Sensor", "c0ffee000001"] {
            assert!(!Target::new(t).matches(&props), "{t}");
        }
    }

    #[test]
    fn only_a_missing_adapter_or_device_is_worth_retrying() {
        assert!(matches!(
            DeviceError::from(BleError::NoAdapter),
            DeviceError::Transient(_)
        ));
        assert!(matches!(
            DeviceError::from(BleError::NoDevice),
            DeviceError::Fatal(_)
        ));
    }
}
