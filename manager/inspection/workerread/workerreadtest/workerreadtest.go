// Package workerreadtest is the tests' side of workerread: a worker that
// client-go's fake plays.
package workerreadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/jobferry/jobferry/manager/inspection/workerread"
)

// Reader reads kube, client-go's fake (which serves no REST), listing the
// typed lists encoded as the API server would send them.
func Reader(kube kubernetes.Interface) *workerread.Reader {
	return workerread.NewWithLister(kube, func(ctx context.Context, namespace, resource string, opts metav1.ListOptions) (io.ReadCloser, error) {
		var list any
		var err error
		switch resource {
		case "pods":
			list, err = kube.CoreV1().Pods(namespace).List(ctx, opts)
		case "events":
			list, err = kube.CoreV1().Events(namespace).List(ctx, opts)
		default:
			return nil, fmt.Errorf("no list of %s", resource)
		}
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(list)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}
