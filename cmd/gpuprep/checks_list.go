package main

import "github.com/gpuprep/gpuprep/preflight"

// checkListKind is the kind of the document gpuprep checks -o json prints
// (schema: docs/schema/CheckList.json).
const checkListKind = "CheckList"

// checkList is gpuprep checks -o json: one object, as every gpuprep JSON
// document, its checks in registry order. R is the row type (checkRow).
type checkList[R any] struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Checks     []R    `json:"checks"`
}

// checkRow is one check of the list: its registry entry.
type checkRow struct {
	ID    string           `json:"id"`
	Title string           `json:"title"`
	Modes []preflight.Mode `json:"modes"`
	// from the registry: what it verifies, the steps that change it,
	// whether a fail is beyond a plan
	Doc        preflight.Doc    `json:"doc"`
	ChangedBy  []string         `json:"changedBy,omitempty"`
	BeyondPlan preflight.Beyond `json:"beyondPlan,omitempty"`
	Remedies   []string         `json:"remedies,omitempty"`
}
