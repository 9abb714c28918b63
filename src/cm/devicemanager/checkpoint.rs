//! `<root-dir>/device-plugins/kubelet_internal_checkpoint` in the Go
//! kubelet's format, both ways:
//! `{"Data":{"PodDeviceEntries":[…],"RegisteredDevices":{…}},"Checksum":N}`.
//!
//! The checksum is FNV-32a over go-spew's `%#v` text of the `Data` part
//! (types printed, map keys sorted), so a file written by either kubelet
//! loads in the other. Go tells nil from empty in that text (`<nil>` vs
//! `[]`), so the fields that JSON may carry as `null` stay `Option`s.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::DeviceManagerError;
use crate::util::gospew::{self, fnv32a};

/// The file's name in the device plugin directory.
pub const CHECKPOINT_FILE: &str = "kubelet_internal_checkpoint";

/// Device ids by NUMA node (`-1`: devices without topology).
pub type DevicesPerNuma = BTreeMap<i64, Vec<String>>;

/// One container's devices of one resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodDevicesEntry {
    #[serde(rename = "PodUID", default)]
    pub pod_uid: String,
    #[serde(rename = "ContainerName", default)]
    pub container_name: String,
    #[serde(rename = "ResourceName", default)]
    pub resource_name: String,
    #[serde(
        rename = "DeviceIDs",
        default,
        serialize_with = "ser_numa",
        deserialize_with = "de_numa"
    )]
    pub device_ids: Option<DevicesPerNuma>,
    /// The plugin's ContainerAllocateResponse, protobuf-encoded (base64 in JSON).
    #[serde(
        rename = "AllocResp",
        default,
        serialize_with = "ser_bytes",
        deserialize_with = "de_bytes"
    )]
    pub alloc_resp: Option<Vec<u8>>,
}

/// The checkpointed data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointData {
    #[serde(rename = "PodDeviceEntries", default)]
    pub pod_device_entries: Option<Vec<PodDevicesEntry>>,
    #[serde(rename = "RegisteredDevices", default)]
    pub registered_devices: Option<BTreeMap<String, Option<Vec<String>>>>,
}

/// The file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCheckpoint {
    #[serde(rename = "Data", default)]
    pub data: CheckpointData,
    #[serde(rename = "Checksum", default)]
    pub checksum: u64,
}

/// Go's JSON orders map keys by their text ("-1" < "0" < "10" < "2").
fn ser_numa<S: Serializer>(v: &Option<DevicesPerNuma>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let Some(map) = v else {
        return s.serialize_none();
    };
    let mut keys: Vec<(String, &Vec<String>)> =
        map.iter().map(|(k, v)| (k.to_string(), v)).collect();
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    let mut m = s.serialize_map(Some(keys.len()))?;
    for (k, v) in keys {
        m.serialize_entry(&k, v)?;
    }
    m.end()
}

fn de_numa<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DevicesPerNuma>, D::Error> {
    let raw: Option<BTreeMap<String, Option<Vec<String>>>> = Option::deserialize(d)?;
    let Some(raw) = raw else { return Ok(None) };
    let mut out = DevicesPerNuma::new();
    for (k, v) in raw {
        let node: i64 = k.parse().map_err(serde::de::Error::custom)?;
        out.insert(node, v.unwrap_or_default());
    }
    Ok(Some(out))
}

fn ser_bytes<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        None => s.serialize_none(),
        Some(b) => s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b)),
    }
}

fn de_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    let raw: Option<String> = Option::deserialize(d)?;
    raw.map(|s| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(serde::de::Error::custom)
    })
    .transpose()
}

/// go-spew's `%#v` of a checkpoint's data; `ids` prints one entry's
/// device ids with their type (the one thing v1 and v2 differ in).
fn spew_data<E>(
    entries: Option<&Vec<E>>,
    registered: Option<&BTreeMap<String, Option<Vec<String>>>>,
    head: impl Fn(&E) -> (&str, &str, &str, Option<&Vec<u8>>),
    ids: impl Fn(&mut String, &E),
) -> String {
    let mut out =
        String::from("(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)");
    gospew::list(&mut out, entries, |out, e| {
        let (pod, container, resource, alloc) = head(e);
        let _ = write!(
            out,
            "{{PodUID:(string){pod} ContainerName:(string){container} ResourceName:(string){resource} DeviceIDs:"
        );
        ids(out, e);
        out.push_str(" AllocResp:([]uint8)");
        gospew::plain_list(out, alloc);
        out.push('}');
    });
    out.push_str(" RegisteredDevices:(map[string][]string)");
    gospew::map(&mut out, registered, |out, v| {
        gospew::plain_list(out, v.as_ref())
    });
    out.push('}');
    out
}

impl CheckpointData {
    /// go-spew's `%#v` of Go's `checkpointData`.
    pub fn spew(&self) -> String {
        spew_data(
            self.pod_device_entries.as_ref(),
            self.registered_devices.as_ref(),
            |e: &PodDevicesEntry| {
                (
                    e.pod_uid.as_str(),
                    e.container_name.as_str(),
                    e.resource_name.as_str(),
                    e.alloc_resp.as_ref(),
                )
            },
            |out, e| {
                out.push_str("(checkpoint.DevicesPerNUMA)");
                gospew::map(out, e.device_ids.as_ref(), |out, devs| {
                    gospew::plain_list(out, Some(devs))
                });
            },
        )
    }

    /// Go's checksum of the data.
    pub fn checksum(&self) -> u64 {
        u64::from(fnv32a(self.spew().as_bytes()))
    }
}

impl DeviceCheckpoint {
    pub fn new(entries: Vec<PodDevicesEntry>, registered: BTreeMap<String, Vec<String>>) -> Self {
        DeviceCheckpoint {
            data: CheckpointData {
                // Go's list starts nil and stays nil without entries.
                pod_device_entries: (!entries.is_empty()).then_some(entries),
                registered_devices: Some(
                    registered.into_iter().map(|(k, v)| (k, Some(v))).collect(),
                ),
            },
            checksum: 0,
        }
    }

    /// The file's bytes, checksum filled in.
    pub fn marshal(&mut self) -> Result<Vec<u8>, DeviceManagerError> {
        self.checksum = self.data.checksum();
        Ok(serde_json::to_vec(self)?)
    }

    /// Parses and verifies a file.
    pub fn unmarshal(blob: &[u8]) -> Result<Self, DeviceManagerError> {
        let cp: DeviceCheckpoint = serde_json::from_slice(blob)?;
        if cp.checksum != cp.data.checksum() {
            return Err(DeviceManagerError::CorruptCheckpoint);
        }

        Ok(cp)
    }

    /// Parses and verifies a file in the v1 layout (device ids as a plain
    /// list), converted to the current one (all devices on NUMA node 0).
    pub fn unmarshal_v1(blob: &[u8]) -> Result<Self, DeviceManagerError> {
        let cp: DeviceCheckpointV1 = serde_json::from_slice(blob)?;
        if cp.checksum != cp.data.checksum() {
            return Err(DeviceManagerError::CorruptCheckpoint);
        }
        let entries = cp.data.pod_device_entries.map(|list| {
            list.into_iter()
                .map(|e| PodDevicesEntry {
                    pod_uid: e.pod_uid,
                    container_name: e.container_name,
                    resource_name: e.resource_name,
                    device_ids: Some([(0, e.device_ids.unwrap_or_default())].into()),
                    alloc_resp: e.alloc_resp,
                })
                .collect()
        });
        let mut out = DeviceCheckpoint {
            data: CheckpointData {
                pod_device_entries: entries,
                registered_devices: cp.data.registered_devices,
            },
            checksum: 0,
        };
        out.checksum = out.data.checksum();
        Ok(out)
    }

    /// The entries and registered resources.
    pub fn into_parts(self) -> (Vec<PodDevicesEntry>, BTreeMap<String, Vec<String>>) {
        (
            self.data.pod_device_entries.unwrap_or_default(),
            self.data
                .registered_devices
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.unwrap_or_default()))
                .collect(),
        )
    }
}

/// One entry of the v1 layout.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodDevicesEntryV1 {
    #[serde(rename = "PodUID", default)]
    pub pod_uid: String,
    #[serde(rename = "ContainerName", default)]
    pub container_name: String,
    #[serde(rename = "ResourceName", default)]
    pub resource_name: String,
    #[serde(rename = "DeviceIDs", default)]
    pub device_ids: Option<Vec<String>>,
    #[serde(
        rename = "AllocResp",
        default,
        serialize_with = "ser_bytes",
        deserialize_with = "de_bytes"
    )]
    pub alloc_resp: Option<Vec<u8>>,
}

/// The v1 layout's data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointDataV1 {
    #[serde(rename = "PodDeviceEntries", default)]
    pub pod_device_entries: Option<Vec<PodDevicesEntryV1>>,
    #[serde(rename = "RegisteredDevices", default)]
    pub registered_devices: Option<BTreeMap<String, Option<Vec<String>>>>,
}

/// The v1 file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCheckpointV1 {
    #[serde(rename = "Data", default)]
    pub data: CheckpointDataV1,
    #[serde(rename = "Checksum", default)]
    pub checksum: u64,
}

impl CheckpointDataV1 {
    /// Go's v1 checksum: the spew text with the v1 type names printed as
    /// the current ones.
    pub fn checksum(&self) -> u64 {
        let text = spew_data(
            self.pod_device_entries.as_ref(),
            self.registered_devices.as_ref(),
            |e: &PodDevicesEntryV1| {
                (
                    e.pod_uid.as_str(),
                    e.container_name.as_str(),
                    e.resource_name.as_str(),
                    e.alloc_resp.as_ref(),
                )
            },
            |out, e| {
                out.push_str("([]string)");
                gospew::plain_list(out, e.device_ids.as_ref());
            },
        );
        u64::from(fnv32a(text.as_bytes()))
    }
}
