package ssh

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/provider"
)

// keepReleased is how long a released machine stays in the state file,
// so that a late Acquire or Release with its token is still answered.
const keepReleased = 7 * 24 * time.Hour

// stateFile is the state file's content.
type stateFile struct {
	Machines []*machine `json:"machines"`
}

// loadState reads the state file; a missing file is an empty fleet.
func loadState(path string) ([]*machine, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ssh provider: state file: %w", err)
	}
	var s stateFile
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("ssh provider: state file %s: %w", path, err)
	}
	for i, m := range s.Machines {
		if m == nil || m.ProviderID == "" || m.ClientToken == "" || m.Host == "" {
			return nil, fmt.Errorf("ssh provider: state file %s: machines[%d]: want provider_id, client_token and host", path, i)
		}
	}
	return s.Machines, nil
}

// saveLocked writes every machine to the state file (atomically, 0600);
// released ones older than keepReleased are dropped. p.mu is held.
func (p *Provider) saveLocked() error {
	now := p.cfg.Clock.Now()
	var s stateFile
	for id, m := range p.machines {
		if m.State == provider.Released && !m.Stopping && now.Sub(m.EndedAt) > keepReleased {
			delete(p.machines, id)
			delete(p.byToken, m.ClientToken)
			continue
		}
		s.Machines = append(s.Machines, m)
	}
	slices.SortFunc(s.Machines, func(a, b *machine) int { return strings.Compare(a.ProviderID, b.ProviderID) })
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.cfg.StateFile), ".ssh-state-*")
	if err != nil {
		return fmt.Errorf("ssh provider: state file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("ssh provider: state file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("ssh provider: state file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("ssh provider: state file: %w", err)
	}
	if err := os.Rename(tmp.Name(), p.cfg.StateFile); err != nil {
		return fmt.Errorf("ssh provider: state file: %w", err)
	}
	return nil
}

func sortMachines(ms []provider.Machine) {
	slices.SortFunc(ms, func(a, b provider.Machine) int { return strings.Compare(a.ProviderID, b.ProviderID) })
}

func sortEvents(evs []provider.Event) {
	slices.SortStableFunc(evs, func(a, b provider.Event) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Machine.ProviderID, b.Machine.ProviderID)
	})
}
