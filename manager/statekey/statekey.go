// Package statekey holds the key that seals jobferry's state on manager
// Jobs (package jobstate): read from a Secret in the manager's namespace,
// made the first time it is asked for. The Job controller seals with it;
// the inspection API checks seals with it.
package statekey

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/jobferry/jobferry/manager/jobstate"
)

// DefaultSecret names the Secret, in the manager's namespace, that
// holds the key sealing jobferry's state on manager Jobs.
const DefaultSecret = "jobferry-manager-state-key"

// stateKeyBytes is the size of the key (HMAC-SHA256's block is larger; 32
// random bytes are its security level).
const stateKeyBytes = 32

// stateKeyField is the Secret's data key holding the key.
const stateKeyField = "key"

// Keys reads the key that seals jobferry's state on manager Jobs
// (package jobstate) from Secret Name in Namespace, and creates it — 32
// random bytes, immutable — when it does not exist: the leader's first
// reconcile makes it, so its creation time is when the key was made, and
// every Job created since must carry a seal under it. Only the manager's
// identity may read Secrets in its namespace; no tenant can. Losing the
// Secret loses nothing but the seals: the next key adopts the state of
// every Job older than itself, as it adopts the state of Jobs placed before
// jobferry sealed its state.
type Keys struct {
	// Reader reads the Secret (the manager's cache, which watches Secrets
	// in its namespace); Writer creates it.
	Reader    client.Reader
	Writer    client.Writer
	Namespace string
	Name      string

	mu  sync.Mutex
	key *jobstate.Key
}

// Key returns the key, reading or creating its Secret the first time. A
// Secret that holds no usable key is an error naming it: the manager does
// not replace a key someone else wrote.
func (k *Keys) Key(ctx context.Context) (jobstate.Key, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return *k.key, nil
	}
	secret := &corev1.Secret{}
	err := k.Reader.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: k.Name}, secret)
	if apierrors.IsNotFound(err) {
		secret, err = k.create(ctx)
	}
	if err != nil {
		return jobstate.Key{}, fmt.Errorf("reading the state key Secret %s/%s: %w", k.Namespace, k.Name, err)
	}
	key, err := keyFrom(secret)
	if err != nil {
		return jobstate.Key{}, err
	}
	k.key = &key
	return key, nil
}

// create makes the key Secret. Another replica that made it first wins: its
// Secret is read back once the cache shows it.
func (k *Keys) create(ctx context.Context) (*corev1.Secret, error) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, Labels: map[string]string{
			"app.kubernetes.io/name": "jobferry-manager", "app.kubernetes.io/component": "state-key",
		}},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      map[string][]byte{stateKeyField: make([]byte, stateKeyBytes)},
	}
	if _, err := rand.Read(secret.Data[stateKeyField]); err != nil {
		return nil, err
	}
	if err := k.Writer.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, errors.New("created by another replica meanwhile; reading it once the cache shows it")
		}
		return nil, fmt.Errorf("creating it: %w", err)
	}
	return secret, nil
}

// keyFrom reads the key out of its Secret.
func keyFrom(secret *corev1.Secret) (jobstate.Key, error) {
	data := secret.Data[stateKeyField]
	if len(data) < stateKeyBytes {
		return jobstate.Key{}, fmt.Errorf("the state key Secret %s/%s holds no key of %d bytes in %q: delete it, and the manager makes a new one (Jobs created before then keep their state, adopted)",
			secret.Namespace, secret.Name, stateKeyBytes, stateKeyField)
	}
	return jobstate.Key{Secret: data, Since: secret.CreationTimestamp.Time}, nil
}
