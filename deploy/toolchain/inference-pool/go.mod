// The Gateway API Inference Extension, only for its published InferencePool CRD
// (config/crd/bases/inference.networking.k8s.io_inferencepools.yaml): deploy/cluster.sh build copies it
// out of the pinned module in the Go module cache; nothing is compiled. go.sum pins the module's hashes.
module kvright.local/toolchain/inference-pool

go 1.26.0

require sigs.k8s.io/gateway-api-inference-extension v1.6.0
