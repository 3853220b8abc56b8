package workerkubeconfig

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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

// FromSecret says why a worker has no kubeconfig with the reason its
// Connected condition takes.
func TestFromSecret(t *testing.T) {
	wc := &v1alpha1.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w1"},
		Spec: v1alpha1.WorkerClusterSpec{KubeConfig: v1alpha1.KubeConfigSource{SecretRef: v1alpha1.SecretKeyRef{Name: "w1-kubeconfig"}}}}
	secret := func(data map[string][]byte) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "jobferry-system", Name: "w1-kubeconfig"}, Data: data}
	}
	cases := map[string]struct {
		objs       []client.Object
		wantReason string
		want       string
	}{
		"no Secret":          {wantReason: v1alpha1.ReasonSecretNotFound},
		"no kubeconfig key":  {objs: []client.Object{secret(map[string][]byte{"other": []byte("x")})}, wantReason: v1alpha1.ReasonKubeConfigKeyMissing},
		"the kubeconfig key": {objs: []client.Object{secret(map[string][]byte{wc.Spec.KubeConfig.SecretRef.KeyOrDefault(): []byte("apiVersion: v1")})}, want: "apiVersion: v1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reader := fake.NewClientBuilder().WithObjects(tc.objs...).Build()
			data, refused := FromSecret(context.Background(), reader, "jobferry-system", wc)
			switch {
			case tc.wantReason != "" && (refused == nil || refused.Reason != tc.wantReason || !strings.Contains(refused.Message, "jobferry-system/w1-kubeconfig")):
				t.Errorf("refused %+v, want reason %s naming the Secret", refused, tc.wantReason)
			case tc.wantReason == "" && (refused != nil || string(data) != tc.want):
				t.Errorf("FromSecret = %q, %+v; want %q", data, refused, tc.want)
			}
		})
	}
}
