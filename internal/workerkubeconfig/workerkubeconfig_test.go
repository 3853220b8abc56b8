package workerkubeconfig

import (
	"errors"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

func TestRESTConfig(t *testing.T) {
	valid := func() *clientcmdapi.Config {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["w"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: []byte("ca")}
		cfg.AuthInfos["w"] = &clientcmdapi.AuthInfo{Token: "t"}
		cfg.Contexts["w"] = &clientcmdapi.Context{Cluster: "w", AuthInfo: "w"}
		cfg.CurrentContext = "w"
		return cfg
	}
	encode := func(change func(*clientcmdapi.Config)) []byte {
		cfg := valid()
		change(cfg)
		data, err := clientcmd.Write(*cfg)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	cases := map[string]struct {
		data   []byte
		reason string // "" when accepted
	}{
		"embedded CA and token": {data: encode(func(*clientcmdapi.Config) {})},
		"garbage":               {data: []byte("\x00\x01 not yaml: ["), reason: v1alpha1.ReasonInvalidKubeConfig},
		"empty":                 {data: []byte(""), reason: v1alpha1.ReasonInvalidKubeConfig},
		"no current context":    {data: encode(func(c *clientcmdapi.Config) { c.CurrentContext = "" }), reason: v1alpha1.ReasonInvalidKubeConfig},
		"no server":             {data: encode(func(c *clientcmdapi.Config) { c.Clusters["w"].Server = "" }), reason: v1alpha1.ReasonInvalidKubeConfig},
		"insecure-skip-tls-verify": {data: encode(func(c *clientcmdapi.Config) {
			c.Clusters["w"].InsecureSkipTLSVerify = true
			c.Clusters["w"].CertificateAuthorityData = nil
		}), reason: v1alpha1.ReasonInsecureKubeConfig},
		"plain http":              {data: encode(func(c *clientcmdapi.Config) { c.Clusters["w"].Server = "http://127.0.0.1:8080" }), reason: v1alpha1.ReasonInsecureKubeConfig},
		"plain HTTP":              {data: encode(func(c *clientcmdapi.Config) { c.Clusters["w"].Server = "HTTP://127.0.0.1:8080" }), reason: v1alpha1.ReasonInsecureKubeConfig},
		"proxy-url":               {data: encode(func(c *clientcmdapi.Config) { c.Clusters["w"].ProxyURL = "http://proxy.example:3128" }), reason: v1alpha1.ReasonInsecureKubeConfig},
		"CA file":                 {data: encode(func(c *clientcmdapi.Config) { c.Clusters["w"].CertificateAuthority = "/etc/ca.crt" }), reason: v1alpha1.ReasonFilePathNotAllowed},
		"client certificate file": {data: encode(func(c *clientcmdapi.Config) { c.AuthInfos["w"].ClientCertificate = "/etc/c.crt" }), reason: v1alpha1.ReasonFilePathNotAllowed},
		"token file":              {data: encode(func(c *clientcmdapi.Config) { c.AuthInfos["w"].TokenFile = "/var/run/token" }), reason: v1alpha1.ReasonFilePathNotAllowed},
		"exec plugin": {data: encode(func(c *clientcmdapi.Config) {
			c.AuthInfos["w"].Exec = &clientcmdapi.ExecConfig{Command: "aws", APIVersion: "client.authentication.k8s.io/v1"}
		}), reason: v1alpha1.ReasonExecPluginNotAllowed},
		"auth provider": {data: encode(func(c *clientcmdapi.Config) {
			c.AuthInfos["w"].AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		}), reason: v1alpha1.ReasonExecPluginNotAllowed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := RESTConfig(tc.data)
			if tc.reason == "" {
				if err != nil || cfg == nil || cfg.Host != "https://127.0.0.1:6443" {
					t.Fatalf("got %v, %v; want the config accepted", cfg, err)
				}
				return
			}
			var kerr *Error
			if !errors.As(err, &kerr) || kerr.Reason != tc.reason || kerr.Message == "" {
				t.Errorf("got %v, want reason %s with a message", err, tc.reason)
			}
		})
	}
}
