//! The `kubectl get` columns of the built-in kinds, as kube-apiserver's
//! printers define them (names, types, `-o wide` priority). A path starting
//! with `!` names a cell computed by `http::printers`; any other path is a
//! simple JSONPath into the object. Name and Age are added by the table
//! layout (Age before the wide columns, unless a column shows the
//! creation time or is `!age`, as the Node's, which has Age in the middle).

use crate::resource::PrinterColumn;

/// One column.
pub(super) struct Col {
    name: &'static str,
    type_: &'static str,
    path: &'static str,
    description: &'static str,
    priority: i64,
}

impl From<&Col> for PrinterColumn {
    fn from(c: &Col) -> Self {
        PrinterColumn {
            name: c.name.into(),
            type_: c.type_.into(),
            json_path: c.path.into(),
            description: c.description.into(),
            priority: c.priority,
        }
    }
}

const fn c(
    name: &'static str,
    type_: &'static str,
    path: &'static str,
    description: &'static str,
) -> Col {
    Col {
        name,
        type_,
        path,
        description,
        priority: 0,
    }
}

const fn wide(
    name: &'static str,
    type_: &'static str,
    path: &'static str,
    description: &'static str,
) -> Col {
    Col {
        name,
        type_,
        path,
        description,
        priority: 1,
    }
}

const CONTAINERS: Col = wide(
    "Containers",
    "string",
    "!containers",
    "Container names of the pod template.",
);
const IMAGES: Col = wide(
    "Images",
    "string",
    "!images",
    "Container images of the pod template.",
);
const SELECTOR: Col = wide(
    "Selector",
    "string",
    "!selector",
    "The label selector of the pods.",
);

pub(super) static NAMESPACE: &[Col] = &[c(
    "Status",
    "string",
    ".status.phase",
    "The phase of the namespace.",
)];

pub(super) static CONFIGMAP: &[Col] = &[c(
    "Data",
    "integer",
    "!datacount",
    "Number of data entries.",
)];

pub(super) static SECRET: &[Col] = &[
    c("Type", "string", ".type", "The type of the secret."),
    c("Data", "integer", "!datacount", "Number of data entries."),
];

pub(super) static EVENT: &[Col] = &[
    c("Type", "string", ".type", "Type of this event."),
    c(
        "Reason",
        "string",
        ".reason",
        "Why the event happened, in a word.",
    ),
    c(
        "Object",
        "string",
        "!eventobject",
        "The object this Event is about.",
    ),
    c(
        "Message",
        "string",
        ".message",
        "What happened, for humans.",
    ),
];

pub(super) static EVENT_V1: &[Col] = &[
    c("Type", "string", ".type", "Type of this event."),
    c("Reason", "string", ".reason", "Why the action was taken."),
    c(
        "Object",
        "string",
        "!eventobject",
        "The object this Event is about.",
    ),
    c("Note", "string", ".note", "What happened, for humans."),
];

pub(super) static POD: &[Col] = &[
    c(
        "Ready",
        "string",
        "!pod-ready",
        "Ready containers out of all containers.",
    ),
    c(
        "Status",
        "string",
        "!pod-status",
        "The aggregate status of the pod's containers.",
    ),
    c(
        "Restarts",
        "string",
        "!pod-restarts",
        "Container restarts in this pod.",
    ),
    wide("IP", "string", "!pod-ip", "The pod's IP address."),
    wide(
        "Node",
        "string",
        "!pod-node",
        "The node the pod is bound to.",
    ),
    wide(
        "Nominated Node",
        "string",
        "!pod-nominated-node",
        "The node the scheduler nominated for the pod.",
    ),
    wide(
        "Readiness Gates",
        "string",
        "!pod-readiness-gates",
        "Readiness gates met out of all gates.",
    ),
];

pub(super) static SERVICE: &[Col] = &[
    c(
        "Type",
        "string",
        ".spec.type",
        "How the service is exposed.",
    ),
    c(
        "Cluster-IP",
        "string",
        "!svc-cluster-ip",
        "The service's virtual IP address.",
    ),
    c(
        "External-IP",
        "string",
        "!svc-external-ip",
        "Addresses the service is reachable on from outside.",
    ),
    c(
        "Port(s)",
        "string",
        "!svc-ports",
        "The ports the service exposes.",
    ),
    wide(
        "Selector",
        "string",
        "!svc-selector",
        "The labels of the pods the service routes to.",
    ),
];

pub(super) static SERVICEACCOUNT: &[Col] = &[c(
    "Secrets",
    "string",
    "!sa-secrets",
    "Number of secrets listed.",
)];

pub(super) static ENDPOINTS: &[Col] = &[c(
    "Endpoints",
    "string",
    "!endpoints",
    "The addresses and ports of the endpoints.",
)];

pub(super) static PVC: &[Col] = &[
    c(
        "Status",
        "string",
        ".status.phase",
        "The phase of the claim.",
    ),
    c(
        "Volume",
        "string",
        ".spec.volumeName",
        "The volume bound to the claim.",
    ),
    c(
        "Capacity",
        "string",
        "!pvc-capacity",
        "The storage the bound volume provides.",
    ),
    c(
        "Access Modes",
        "string",
        "!pvc-access-modes",
        "How the volume may be mounted.",
    ),
    c(
        "StorageClass",
        "string",
        "!storage-class",
        "The storage class of the claim.",
    ),
    c(
        "VolumeAttributesClass",
        "string",
        "!volume-attributes-class",
        "The volume attributes class of the claim.",
    ),
    wide(
        "VolumeMode",
        "string",
        "!volume-mode",
        "Filesystem or Block.",
    ),
];

pub(super) static PV: &[Col] = &[
    c(
        "Capacity",
        "string",
        "!pv-capacity",
        "The storage of the volume.",
    ),
    c(
        "Access Modes",
        "string",
        "!pv-access-modes",
        "How the volume may be mounted.",
    ),
    c(
        "Reclaim Policy",
        "string",
        ".spec.persistentVolumeReclaimPolicy",
        "What happens to the volume when its claim goes.",
    ),
    c(
        "Status",
        "string",
        ".status.phase",
        "The phase of the volume.",
    ),
    c(
        "Claim",
        "string",
        "!pv-claim",
        "The claim bound to the volume.",
    ),
    c(
        "StorageClass",
        "string",
        "!storage-class",
        "The storage class of the volume.",
    ),
    c(
        "VolumeAttributesClass",
        "string",
        "!volume-attributes-class",
        "The volume attributes class of the volume.",
    ),
    c(
        "Reason",
        "string",
        ".status.reason",
        "Why the volume is in its phase.",
    ),
    wide(
        "VolumeMode",
        "string",
        "!volume-mode",
        "Filesystem or Block.",
    ),
];

pub(super) static NODE: &[Col] = &[
    c(
        "Status",
        "string",
        "!node-status",
        "Whether the node is ready and schedulable.",
    ),
    c("Roles", "string", "!node-roles", "The roles of the node."),
    c(
        "Age",
        "string",
        "!age",
        "Time since the object was created.",
    ),
    c(
        "Version",
        "string",
        ".status.nodeInfo.kubeletVersion",
        "The kubelet version.",
    ),
    wide(
        "Internal-IP",
        "string",
        "!node-internal-ip",
        "The node's internal address.",
    ),
    wide(
        "External-IP",
        "string",
        "!node-external-ip",
        "The node's external address.",
    ),
    wide(
        "OS-Image",
        "string",
        ".status.nodeInfo.osImage",
        "The operating system image.",
    ),
    wide(
        "Kernel-Version",
        "string",
        ".status.nodeInfo.kernelVersion",
        "The kernel version.",
    ),
    wide(
        "Container-Runtime",
        "string",
        ".status.nodeInfo.containerRuntimeVersion",
        "The container runtime and its version.",
    ),
];

pub(super) static DEPLOYMENT: &[Col] = &[
    c(
        "Ready",
        "string",
        "!ready",
        "Ready pods out of desired pods.",
    ),
    c(
        "Up-to-date",
        "integer",
        ".status.updatedReplicas",
        "Pods running the current template.",
    ),
    c(
        "Available",
        "integer",
        ".status.availableReplicas",
        "Pods available for at least minReadySeconds.",
    ),
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

pub(super) static REPLICASET: &[Col] = &[
    c("Desired", "integer", "!desired", "Desired pods."),
    c("Current", "integer", "!current", "Existing pods."),
    c("Ready", "integer", "!ready-count", "Ready pods."),
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

pub(super) static STATEFULSET: &[Col] = &[
    c(
        "Ready",
        "string",
        "!ready",
        "Ready pods out of desired pods.",
    ),
    CONTAINERS,
    IMAGES,
];

pub(super) static DAEMONSET: &[Col] = &[
    c(
        "Desired",
        "integer",
        "!ds-desired",
        "Nodes that should run the daemon pod.",
    ),
    c(
        "Current",
        "integer",
        "!ds-current",
        "Nodes running at least one daemon pod.",
    ),
    c(
        "Ready",
        "integer",
        "!ds-ready",
        "Nodes with a ready daemon pod.",
    ),
    c(
        "Up-to-date",
        "integer",
        "!ds-updated",
        "Nodes running the current template.",
    ),
    c(
        "Available",
        "integer",
        "!ds-available",
        "Nodes with an available daemon pod.",
    ),
    c(
        "Node Selector",
        "string",
        "!node-selector",
        "The nodes the daemon pods may run on.",
    ),
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

pub(super) static JOB: &[Col] = &[
    c("Status", "string", "!job-status", "The state of the job."),
    c(
        "Completions",
        "string",
        "!job-completions",
        "Succeeded pods out of the completions wanted.",
    ),
    c(
        "Duration",
        "string",
        "!job-duration",
        "How long the job ran.",
    ),
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

pub(super) static CRONJOB: &[Col] = &[
    c("Schedule", "string", ".spec.schedule", "The cron schedule."),
    c(
        "Timezone",
        "string",
        "!cj-timezone",
        "The time zone of the schedule.",
    ),
    c(
        "Suspend",
        "boolean",
        ".spec.suspend",
        "Whether new runs are held back.",
    ),
    c("Active", "integer", "!cj-active", "Jobs running now."),
    c(
        "Last Schedule",
        "string",
        "!cj-last-schedule",
        "Time since the job was last scheduled.",
    ),
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

pub(super) static HPA: &[Col] = &[
    c(
        "Reference",
        "string",
        "!hpa-reference",
        "The workload the autoscaler scales.",
    ),
    c(
        "Targets",
        "string",
        "!hpa-targets",
        "Current and target metric values.",
    ),
    c("MinPods", "string", "!hpa-min", "The fewest replicas."),
    c("MaxPods", "string", "!hpa-max", "The most replicas."),
    c(
        "Replicas",
        "string",
        "!hpa-replicas",
        "The replicas observed.",
    ),
];

pub(super) static INGRESS: &[Col] = &[
    c(
        "Class",
        "string",
        "!ing-class",
        "The ingress class that handles it.",
    ),
    c(
        "Hosts",
        "string",
        "!ing-hosts",
        "The hosts its rules match.",
    ),
    c(
        "Address",
        "string",
        "!ing-address",
        "The addresses of its load balancer.",
    ),
    c("Ports", "string", "!ing-ports", "The ports it serves."),
];

pub(super) static NETWORKPOLICY: &[Col] = &[c(
    "Pod-Selector",
    "string",
    "!netpol-pod-selector",
    "The pods the policy applies to.",
)];

pub(super) static PDB: &[Col] = &[
    c(
        "Min Available",
        "string",
        "!pdb-min-available",
        "Pods that must stay available.",
    ),
    c(
        "Max Unavailable",
        "string",
        "!pdb-max-unavailable",
        "Pods that may be unavailable.",
    ),
    c(
        "Allowed Disruptions",
        "integer",
        "!pdb-allowed",
        "Pods that may be disrupted now.",
    ),
];

pub(super) static ROLE: &[Col] = &[c(
    "Created At",
    "date",
    ".metadata.creationTimestamp",
    "When the object was created.",
)];

pub(super) static ROLEBINDING: &[Col] = &[
    c("Role", "string", "!binding-role", "The role granted."),
    wide(
        "Users",
        "string",
        "!binding-users",
        "Users granted the role.",
    ),
    wide(
        "Groups",
        "string",
        "!binding-groups",
        "Groups granted the role.",
    ),
    wide(
        "ServiceAccounts",
        "string",
        "!binding-serviceaccounts",
        "Service accounts granted the role.",
    ),
];

pub(super) static CRD: &[Col] = &[c("Created At", "date", ".metadata.creationTimestamp", "")];

pub(super) static LEASE: &[Col] = &[c(
    "Holder",
    "string",
    ".spec.holderIdentity",
    "The holder of the lease.",
)];

pub(super) static ENDPOINTSLICE: &[Col] = &[
    c(
        "AddressType",
        "string",
        ".addressType",
        "The type of the addresses.",
    ),
    c(
        "Ports",
        "string",
        "!eps-ports",
        "The ports of the endpoints.",
    ),
    c(
        "Endpoints",
        "string",
        "!eps-endpoints",
        "The addresses of the endpoints.",
    ),
];
