package main

import "github.com/gpuprep/gpuprep/provision"

// rollbackKind is the kind of the document gpuprep rollback -o json prints
// (schema: docs/schema/RollbackResult.json).
const rollbackKind = "RollbackResult"

// rollbackDoc is gpuprep rollback -o json: what rollback did, under the
// apiVersion and kind every gpuprep JSON document has (a reader that
// decodes a provision.RollbackResult from it still can).
type rollbackDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*provision.RollbackResult
}
