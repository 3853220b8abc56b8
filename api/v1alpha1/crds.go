package v1alpha1

import "embed"

// CRDs holds the generated CustomResourceDefinition manifests of this package
// (crds/*.yaml), so tests, the dev environment and the CLI install exactly what
// the charts ship.
//
//go:embed crds/*.yaml
var CRDs embed.FS
