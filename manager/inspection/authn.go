package inspection

import (
	"context"
	"fmt"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// The ConfigMap in which the API server publishes how it authenticates to
// extension API servers: the CA of its front-proxy client certificate, the
// names that certificate may carry and the headers naming the user.
// Reading it is what the built-in Role extension-apiserver-authentication-reader
// grants (the chart binds it).
const (
	authConfigMapNamespace = "kube-system"
	authConfigMap          = "extension-apiserver-authentication"
)

// frontProxy authenticates the requests the API server's aggregator proxies
// to the manager, as every extension API server does (k8s.io/apiserver's
// request-header authenticator): a client certificate signed by the
// front-proxy CA with an allowed name, and the user in X-Remote-User,
// X-Remote-Group and X-Remote-Extra-*. Anything else — a request straight
// to the manager's port with forged headers — is not authenticated. Both the
// CA and the names follow the ConfigMap as it changes.
type frontProxy struct {
	authenticator.Request
	headers *headerrequest.RequestHeaderAuthRequestController
	ca      *dynamiccertificates.ConfigMapCAController
}

func newFrontProxy(kube kubernetes.Interface) (*frontProxy, error) {
	headers := headerrequest.NewRequestHeaderAuthRequestController(authConfigMap, authConfigMapNamespace, kube,
		"requestheader-username-headers", "requestheader-uid-headers", "requestheader-group-headers",
		"requestheader-extra-headers-prefix", "requestheader-allowed-names")
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("front-proxy-client-ca", authConfigMapNamespace, authConfigMap,
		"requestheader-client-ca-file", kube)
	if err != nil {
		return nil, fmt.Errorf("reading the front-proxy CA from ConfigMap %s/%s: %w", authConfigMapNamespace, authConfigMap, err)
	}
	return &frontProxy{
		Request: headerrequest.NewDynamicVerifyOptionsSecure(ca.VerifyOptions,
			headerrequest.StringSliceProviderFunc(headers.AllowedClientNames),
			headerrequest.StringSliceProviderFunc(headers.UsernameHeaders),
			headerrequest.StringSliceProviderFunc(headers.UIDHeaders),
			headerrequest.StringSliceProviderFunc(headers.GroupHeaders),
			headerrequest.StringSliceProviderFunc(headers.ExtraHeaderPrefixes)),
		headers: headers, ca: ca,
	}, nil
}

// load reads the ConfigMap once, so the server authenticates from its first
// request: an API server that publishes no front-proxy CA (it was started
// without --requestheader-client-ca-file) cannot serve aggregated APIs, and
// the error says so.
func (f *frontProxy) load(ctx context.Context) error {
	if err := f.headers.RunOnce(ctx); err != nil {
		return fmt.Errorf("reading the request headers from ConfigMap %s/%s: %w", authConfigMapNamespace, authConfigMap, err)
	}
	if err := f.ca.RunOnce(ctx); err != nil {
		return fmt.Errorf("reading the front-proxy CA (requestheader-client-ca-file) from ConfigMap %s/%s: %w (is the API server started with --requestheader-client-ca-file?)",
			authConfigMapNamespace, authConfigMap, err)
	}
	return nil
}

// run follows the ConfigMap until ctx ends.
func (f *frontProxy) run(ctx context.Context) {
	go f.headers.Run(ctx, 1)
	go f.ca.Run(ctx, 1)
}
