// Package label sets a Node's workload labels (gpuprep label, and apply's
// label step), journalled so that gpuprep rollback restores them: through
// the Kubernetes API, a label entry with the labels the Node had before
// the patch (Change.Apply); before the node joins, in the kubelet's files,
// each a journalled file write (WriteFiles).
package label
