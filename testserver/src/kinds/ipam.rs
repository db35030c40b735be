//! The cluster IPs and node ports of Services, as kube-apiserver's
//! allocators hand them out: a cluster IP from the service CIDR
//! (`10.96.0.0/12`; `10.96.0.1` is the `kubernetes` Service's), picked at
//! random or the one the Service asks for if free; a node port from
//! 30000-32767 for each port of a NodePort or LoadBalancer Service; both
//! released when the Service goes.

use crate::status::FieldError;
use rand::RngExt;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::net::Ipv4Addr;

/// The service CIDR.
pub(crate) const SERVICE_CIDR: &str = "10.96.0.0/12";
const CIDR_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const CIDR_SIZE: u32 = 1 << 20;
/// The first address, reserved for the `kubernetes` Service.
pub(crate) const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
const NODE_PORTS: std::ops::RangeInclusive<u16> = 30000..=32767;

/// Addresses and ports in use.
#[derive(Debug, Default)]
pub(crate) struct Ipam {
    ips: HashSet<Ipv4Addr>,
    node_ports: HashSet<u16>,
}

/// What one assignment reserved (so a failed write can give it back).
#[derive(Debug, Default)]
pub(crate) struct Reserved {
    ips: Vec<Ipv4Addr>,
    node_ports: Vec<u16>,
}

fn in_cidr(ip: Ipv4Addr) -> bool {
    u32::from(ip).wrapping_sub(CIDR_BASE) < CIDR_SIZE
}

fn needs_cluster_ip(svc: &Value) -> bool {
    svc["spec"]["type"] != "ExternalName"
}

fn needs_node_ports(svc: &Value) -> bool {
    let t = &svc["spec"]["type"];
    t == "NodePort"
        || (t == "LoadBalancer" && svc["spec"]["allocateLoadBalancerNodePorts"] != false)
}

fn cluster_ip(svc: &Value) -> Option<Ipv4Addr> {
    svc["spec"]["clusterIP"].as_str()?.parse().ok()
}

fn node_ports(svc: &Value) -> Vec<u16> {
    svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["nodePort"].as_u64())
        .filter_map(|n| u16::try_from(n).ok())
        .collect()
}

impl Ipam {
    /// Fills in the cluster IP (and `clusterIPs`, `ipFamilies`,
    /// `ipFamilyPolicy`) and node ports `svc` needs, reserving them;
    /// what `previous` (the stored Service, on update) holds is its own.
    pub(crate) fn assign(
        &mut self,
        svc: &mut Value,
        previous: Option<&Value>,
    ) -> Result<Reserved, FieldError> {
        let mut reserved = Reserved::default();
        let result = self.assign_inner(svc, previous, &mut reserved);
        if result.is_err() {
            self.give_back(&reserved);
        }
        result.map(|()| reserved)
    }

    fn assign_inner(
        &mut self,
        svc: &mut Value,
        previous: Option<&Value>,
        reserved: &mut Reserved,
    ) -> Result<(), FieldError> {
        if needs_cluster_ip(svc) {
            self.assign_cluster_ip(svc, previous.and_then(cluster_ip), reserved)?;
        }
        if needs_node_ports(svc) {
            let owned_ports = previous.map(node_ports).unwrap_or_default();
            self.assign_node_ports(svc, &owned_ports, reserved)?;
        }
        Ok(())
    }

    /// The cluster IP `svc` asks for (`None` for headless, empty for any),
    /// reserved unless it is `owned_ip`, written back with its IP family.
    fn assign_cluster_ip(
        &mut self,
        svc: &mut Value,
        owned_ip: Option<Ipv4Addr>,
        reserved: &mut Reserved,
    ) -> Result<(), FieldError> {
        let asked = svc["spec"]["clusterIP"].as_str().unwrap_or("").to_owned();
        let ip = match asked.as_str() {
            "None" => None,
            "" => Some(self.pick_ip().ok_or_else(|| {
                FieldError::invalid("spec.clusterIPs", json!([]), "range is full")
            })?),
            text => {
                let ip: Ipv4Addr = text.parse().map_err(|_| {
                    FieldError::invalid(
                        "spec.clusterIPs[0]",
                        json!(text),
                        "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                    )
                })?;
                if Some(ip) != owned_ip {
                    self.reserve_ip(ip)?;
                }
                Some(ip)
            }
        };
        if let Some(ip) = ip {
            if Some(ip) != owned_ip {
                reserved.ips.push(ip);
                self.ips.insert(ip);
            }
        }
        let text = ip.map_or_else(|| "None".to_owned(), |i| i.to_string());
        if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("clusterIP".into(), json!(text));
            spec.insert("clusterIPs".into(), json!([text]));
            spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
            spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
        }
        Ok(())
    }

    /// A node port for each of `svc`'s ports: the one it asks for (free,
    /// in range, or among `owned_ports`) or any free one.
    fn assign_node_ports(
        &mut self,
        svc: &mut Value,
        owned_ports: &[u16],
        reserved: &mut Reserved,
    ) -> Result<(), FieldError> {
        let ports = svc
            .get_mut("spec")
            .and_then(|s| s.get_mut("ports"))
            .and_then(Value::as_array_mut);
        for (i, p) in ports.into_iter().flatten().enumerate() {
            let asked = p["nodePort"].as_u64().and_then(|n| u16::try_from(n).ok());
            let port = match asked {
                Some(n) if owned_ports.contains(&n) => continue,
                Some(n) => {
                    if !NODE_PORTS.contains(&n) || self.node_ports.contains(&n) {
                        let why = if NODE_PORTS.contains(&n) {
                            "provided port is already allocated"
                        } else {
                            "provided port is not in the valid range. The range of valid ports is 30000-32767"
                        };
                        return Err(FieldError::invalid(
                            format!("spec.ports[{i}].nodePort"),
                            json!(n),
                            why,
                        ));
                    }
                    n
                }
                None => self.pick_node_port().ok_or_else(|| {
                    FieldError::invalid(
                        format!("spec.ports[{i}].nodePort"),
                        json!(0),
                        "range is full",
                    )
                })?,
            };
            self.node_ports.insert(port);
            reserved.node_ports.push(port);
            if let Some(m) = p.as_object_mut() {
                m.insert("nodePort".into(), json!(port));
            }
        }
        Ok(())
    }

    fn reserve_ip(&self, ip: Ipv4Addr) -> Result<(), FieldError> {
        let field = "spec.clusterIPs";
        if !in_cidr(ip) {
            return Err(FieldError::invalid(
                field,
                json!([ip.to_string()]),
                format!("failed to allocate IP {ip}: provided IP is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"),
            ));
        }
        if self.ips.contains(&ip) {
            return Err(FieldError::invalid(
                field,
                json!([ip.to_string()]),
                format!("failed to allocate IP {ip}: provided IP is already allocated"),
            ));
        }
        Ok(())
    }

    fn pick_ip(&self) -> Option<Ipv4Addr> {
        let mut rng = rand::rng();
        // the network and broadcast addresses are never handed out
        for _ in 0..64 {
            let ip = Ipv4Addr::from(CIDR_BASE + rng.random_range(2..CIDR_SIZE - 1));
            if !self.ips.contains(&ip) {
                return Some(ip);
            }
        }
        (2..CIDR_SIZE - 1)
            .map(|o| Ipv4Addr::from(CIDR_BASE + o))
            .find(|ip| !self.ips.contains(ip))
    }

    fn pick_node_port(&self) -> Option<u16> {
        let mut rng = rand::rng();
        for _ in 0..64 {
            let p = rng.random_range(NODE_PORTS);
            if !self.node_ports.contains(&p) {
                return Some(p);
            }
        }
        NODE_PORTS.clone().find(|p| !self.node_ports.contains(p))
    }

    /// Takes back what an assignment reserved (its write failed).
    pub(crate) fn give_back(&mut self, r: &Reserved) {
        for ip in &r.ips {
            self.ips.remove(ip);
        }
        for p in &r.node_ports {
            self.node_ports.remove(p);
        }
    }

    /// Releases what `old` held and `new` (the same Service, updated, or
    /// `None` when it is gone) no longer does.
    pub(crate) fn release(&mut self, old: &Value, new: Option<&Value>) {
        let kept_ip = new.and_then(cluster_ip);
        if let Some(ip) = cluster_ip(old).filter(|ip| Some(*ip) != kept_ip) {
            self.ips.remove(&ip);
        }
        let kept_ports = new.map(node_ports).unwrap_or_default();
        for p in node_ports(old) {
            if !kept_ports.contains(&p) {
                self.node_ports.remove(&p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(t: &str, ip: &str) -> Value {
        json!({"spec": {"type": t, "clusterIP": ip, "ports": [{"port": 80}, {"port": 443, "nodePort": 30443}]}})
    }

    #[test]
    fn allocates_unique_addresses_and_releases_them() {
        let mut ipam = Ipam::default();
        let mut kubernetes = svc("ClusterIP", "10.96.0.1");
        assert!(ipam.assign(&mut kubernetes, None).is_ok());
        let mut seen = HashSet::new();
        for _ in 0..500 {
            let mut s = svc("ClusterIP", "");
            ipam.assign(&mut s, None)
                .map_err(|e| e.to_string())
                .unwrap_or_default();
            let ip = cluster_ip(&s).unwrap_or(KUBERNETES_SERVICE_IP);
            assert!(in_cidr(ip) && ip != KUBERNETES_SERVICE_IP);
            assert!(seen.insert(ip), "{ip} handed out twice");
            assert_eq!(s["spec"]["clusterIPs"], json!([ip.to_string()]));
        }
        let mut taken = svc("ClusterIP", "10.96.0.1");
        let err = ipam.assign(&mut taken, None).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("spec.clusterIPs: Invalid value: [\"10.96.0.1\"]: failed to allocate IP 10.96.0.1: provided IP is already allocated"));
        let mut outside = svc("ClusterIP", "192.168.0.1");
        assert!(ipam.assign(&mut outside, None).is_err());
        let mut headless = svc("ClusterIP", "None");
        assert!(ipam.assign(&mut headless, None).is_ok());
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    }

    #[test]
    fn node_ports_for_node_port_services() {
        let mut ipam = Ipam::default();
        let mut a = svc("NodePort", "");
        let reserved = ipam.assign(&mut a, None).map_err(|e| e.to_string());
        assert!(reserved.is_ok());
        let ports = node_ports(&a);
        assert_eq!(ports.len(), 2);
        assert!(ports.contains(&30443));
        // the same port again fails, and reserves nothing
        let mut b = svc("NodePort", "");
        assert!(ipam.assign(&mut b, None).is_err());
        assert_eq!(ipam.ips.len(), 1);
        // an update keeps what the Service holds
        let mut again = a.clone();
        assert!(ipam.assign(&mut again, Some(&a)).is_ok());
        ipam.release(&a, None);
        assert!(ipam.ips.is_empty() && ipam.node_ports.is_empty());
        let mut ext = svc("ExternalName", "");
        assert!(ipam.assign(&mut ext, None).is_ok());
        assert!(ext["spec"].get("clusterIPs").is_none());
    }
}
