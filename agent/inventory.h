// Inventory: what this node offers to the scheduler: GPUs, CPUs, memory; and what a replica
// needs of the node to use them: its GPUs' names and device nodes, its RDMA devices, the
// interface other nodes reach it at.
//
// GPUs come from NVML, loaded at run time (dlopen "libnvidia-ml.so.1"), so the agent builds and
// runs on nodes without the NVIDIA driver; there it reports no GPUs. A declared count (--gpus N)
// replaces detection with N fake devices (model "declared"), for CPU-only nodes and tests. Where
// every GPU is partitioned alike into MIG devices, those are the node's GPUs (OffersMigDevices).
// CPUs are those this process may run on (sched_getaffinity); memory is MemTotal.
//
// Where a GPU sits: NVML names its NUMA node and the CPUs near it. A replica pinned to GPUs runs
// on the CPUs near them (GpuLocalCpus; the agent's --cpu-binding), as torchrun's --numa-binding
// and Slurm's --gpu-bind=closest place ranks: its pinned host buffers, its data loaders and the
// staging of device buffers through host memory (collective/) then stay on the GPUs' NUMA node,
// not across the socket link. Linux allocates a process's memory on the node it runs on, so
// memory follows without a policy of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/nvml.h"
#include "common/job_spec.h"
#include "common/status.h"

namespace cohort::agent {

// A GPU the agent offers: a whole GPU, or a MIG device (see OffersMigDevices).
struct GpuDevice {
  // What the coordinator pins it by: a whole GPU's NVML index, which CUDA uses with
  // CUDA_DEVICE_ORDER=PCI_BUS_ID; a MIG device's place among the node's MIG devices (0, 1, ...
  // in order of GPU and slot).
  int index = 0;
  std::string model;  // a MIG device's: "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
  int64_t memory_mb = 0;
  std::string uuid;            // a MIG device's: "MIG-...", which CUDA_VISIBLE_DEVICES names
  int numa_node = -1;          // -1: unknown (NVML does not say; a declared GPU)
  std::vector<int> near_cpus;  // ascending, of those this agent may run on; empty: unknown
  // A MIG device's GPU (its NVML index), slot on it, GPU instance and compute instance (-1: NVML
  // does not say); gpu -1 for a whole GPU.
  struct Mig {
    int gpu = -1;
    int slot = 0;
    int gpu_instance = -1;
    int compute_instance = -1;
  };
  Mig mig;

  bool is_mig() const { return mig.gpu >= 0; }
  // The NVML index of the GPU it is, or is a slice of.
  int gpu() const { return is_mig() ? mig.gpu : index; }
};

struct NodeInventory {
  std::vector<GpuDevice> gpus;
  int cpus = 0;
  int64_t memory_mb = 0;
};

// The model of a declared GPU (--gpus N).
inline constexpr char kDeclaredGpuModel[] = "declared";
// N fake devices 0..N-1 of model kDeclaredGpuModel.
std::vector<GpuDevice> DeclaredGpus(int count);
// Adds the labels of the GPUs that NVIDIA's GPU feature discovery gives Kubernetes nodes, so that
// a node_selector or node_affinity can ask for them with no --label: nvidia.com/gpu.product (the
// model with each character a label value cannot hold as '-': "NVIDIA-H100-80GB-HBM3"),
// nvidia.com/gpu.count ("8") and nvidia.com/gpu.memory (MiB of one GPU: "81559"; node_affinity's
// Gt and Lt compare it); and GKE's kAcceleratorLabel where GkeAcceleratorKind knows the model
// (which a Vertex job's acceleratorType asks for). MIG devices (OffersMigDevices) are GPUs of
// their name's model ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") with nvidia.com/mig.strategy=single,
// as GPU feature discovery labels them, and no GKE kind. Only where NVML named one model for
// every GPU (not for declared ones), and never over a label the admin gave or beyond
// kMaxNodeLabels.
void AddGpuLabels(const std::vector<GpuDevice>& gpus, NodeLabels* labels);
// The kind GKE names a GPU of NVML's `model` with `memory_mb` ("nvidia-h100-80gb" for "NVIDIA
// H100 80GB HBM3"), by the model's words: GB200, B200, H200, H100 (of 80 GB), A100 (of 40 or 80
// GB), L4, T4, V100, P100, P4, K80. "" for one GKE does not name (an H100 NVL, an L40S).
std::string GkeAcceleratorKind(const std::string& model, int64_t memory_mb);
// The node's RDMA devices (InfiniBand, RoCE), as paths under `dev_dir`: "infiniband/rdma_cm",
// "infiniband/umad0", "infiniband/uverbs0", ...: the verbs devices, the connection manager and the
// management datagram ports that libibverbs and librdmacm open (NCCL's IB transport, UCX's rc/dc
// and rdmacm, ibstat); no subnet manager port (issm). Character devices only, sorted; none
// without RDMA (no <dev_dir>/infiniband).
std::vector<std::string> RdmaDevices(const std::string& dev_dir = "/dev");
// Adds the RDMA labels of Kubernetes' node feature discovery, where the admin gave none:
// feature.node.kubernetes.io/rdma.capable=true with a verbs device (an RDMA NIC), and
// rdma.available=true with the connection manager too (ib_uverbs and rdma_ucm loaded), so that a
// pool's node_selector can ask for nodes its NCCL or UCX traffic goes over RDMA on.
void AddRdmaLabels(const std::vector<std::string>& rdma_devices, NodeLabels* labels);
// Whether the agent offers MIG devices rather than whole GPUs, as NVIDIA's Kubernetes device
// plugin does with its "single" strategy: where every GPU (`migs`, by NVML index) is in MIG mode,
// has MIG devices, and all of them have one name (one GPU model, one profile: "... MIG 1g.10gb").
// Then each MIG device is a GPU of the node, and jobs ask for them by count as for whole GPUs
// (node labels name the profile). Otherwise whole GPUs, one in MIG mode being unfit (Nvml::
// Problem says why): with kinds of slices mixed, a count could not say which a replica gets.
bool OffersMigDevices(const std::vector<Nvml::Mig>& migs);
// `offered` where they are MIG devices; none where they are whole GPUs.
std::vector<GpuDevice> MigDevicesOffered(const std::vector<GpuDevice>& offered);
// The GPUs the agent offers (OffersMigDevices: the MIG devices, each with its GPU's NUMA node and
// near CPUs). kNotFound when the library cannot be loaded (no driver), another error when it
// loads but fails.
StatusOr<std::vector<GpuDevice>> ProbeNvmlGpus();
// What CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES name each of `pinned` (indexes into
// `gpus`) by: a whole GPU by its index ("2"), a MIG device by its UUID ("MIG-..."); an index not
// in `gpus` by itself.
std::vector<std::string> VisibleGpuNames(const std::vector<GpuDevice>& gpus,
                                         const std::vector<int>& pinned);
// The device nodes under /dev that a container pinned to `pinned` needs beside the control nodes
// (nvidiactl, nvidia-uvm): "nvidia<N>" of each GPU (a MIG device's: its GPU's, once), and for a
// MIG device the capability nodes of its GPU instance and compute instance,
// "nvidia-caps/nvidia-cap<M>", M as the driver lists it under `caps_dir`
// (/proc/driver/nvidia/capabilities/gpu<N>/mig/gi<G>/access and .../gi<G>/ci<C>/access, line
// "DeviceFileMinor: M"); one it does not list is left out.
std::vector<std::string> GpuDeviceNodes(
    const std::vector<GpuDevice>& gpus, const std::vector<int>& pinned,
    const std::string& caps_dir = "/proc/driver/nvidia/capabilities");
int DetectCpus();
int64_t DetectMemoryMb();
// The CPUs this process may run on (sched_getaffinity), ascending; empty where it cannot tell.
std::vector<int> OwnCpus();

// The CPUs a replica pinned to GPUs `pinned` (indexes into `gpus`) should run on: those near any
// of them, ascending. Empty (it runs where the agent may) where it has no GPU, where NVML named
// no near CPUs for one of them, or where they are fewer than the `cpus` it asked for (binding
// would take away what it was given; 0: it asked for none).
std::vector<int> GpuLocalCpus(const std::vector<GpuDevice>& gpus, const std::vector<int>& pinned,
                              int cpus);
// A kernel cpulist of ascending CPUs: "0-3,8" ("" for none).
std::string CpuListText(const std::vector<int>& cpus);

// The network interface that holds `address` (an IPv4 or IPv6 address, or a name that resolves
// to one of this node's): "eth0", "lo"; "" where no interface of this node has it. Replicas'
// gloo binds to it (GLOO_SOCKET_IFNAME): torch's gloo otherwise binds to whatever the hostname
// resolves to, 127.0.1.1 on a stock Debian host, which no other node reaches.
std::string InterfaceOfAddress(const std::string& address);

// TCP ports in LISTEN state on this node (IPv4 and IPv6), sorted, without duplicates: what the
// coordinator must not hand to replicas here. Read from /proc/net/tcp and /proc/net/tcp6.
std::vector<int> ListeningTcpPorts();
// The LISTEN ports of one /proc/net/tcp[6] text (header line first; the local address's port and
// the state are hex). Lines that do not parse are ignored.
std::vector<int> ParseListeningPorts(const std::string& proc_net_tcp);

// The network stack this agent's replicas bind ports in (process replicas share the agent's; OCI
// containers too, having no network namespace of their own): "<boot id> <network namespace>",
// e.g. "0b5f...e1 net:[4026531840]". Agents on one host in one namespace report the same, so the
// coordinator hands each port to one replica among them at a time; a host, or a namespace, of
// its own has all of --port-range to itself. "" when /proc does not tell (the coordinator then
// takes the address for it).
std::string PortDomain();

}  // namespace cohort::agent
