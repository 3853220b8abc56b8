// Command registry serves an OCI distribution registry (CNCF Distribution,
// github.com/distribution/distribution/v3) from a configuration file: the
// real registry tests publish a release to and real nodes pull from. It
// links the filesystem storage driver and htpasswd authentication only
// (upstream's cmd/registry links every cloud storage SDK besides).
//
//	registry serve CONFIG.yml
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if len(os.Args) != 3 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: registry serve CONFIG.yml")
		os.Exit(2)
	}
	if err := serve(os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func serve(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	config, err := configuration.Parse(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("configuration %s: %w", path, err)
	}
	r, err := registry.NewRegistry(context.Background(), config)
	if err != nil {
		return err
	}
	return r.ListenAndServe()
}
