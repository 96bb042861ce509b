package main

// checkListKind is the kind of the document gpuprep checks -o json prints
// (schema: docs/schema/CheckList.json).
const checkListKind = "CheckList"

// checkList is gpuprep checks -o json: one object, as every gpuprep JSON
// document, its checks in registry order. R is the command's row type.
type checkList[R any] struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Checks     []R    `json:"checks"`
}
