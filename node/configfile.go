package node

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"tally/internal/flagerr"

	"go.yaml.in/yaml/v3"
)

// ApplyFile sets flags from a YAML configuration file whose keys are the
// flags' names (data-dir: /var/lib/tally). A flag already set, on the
// command line or by its TALLY_* variable, keeps its value: a flag wins
// over the environment, which wins over the file. An unknown key, a key
// twice, a value the flag refuses, or anything but a mapping of scalars
// (or lists of scalars, joined with commas) is an error naming the key.
func (c *Config) ApplyFile(fs *flag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: --config: %v", ErrConfig, err)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file sets nothing
		}
		return fmt.Errorf("%w: --config %s: %v", ErrConfig, path, err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: --config %s: want a mapping of flag names to values", ErrConfig, path)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		name := k.Value
		where := fmt.Sprintf("--config %s:%d: %s", path, k.Line, name)
		if seen[name] {
			return fmt.Errorf("%w: %s: given twice", ErrConfig, where)
		}
		seen[name] = true
		if fs.Lookup(name) == nil || name == "config" {
			return fmt.Errorf("%w: %s: no such setting (keys are the flags' names, as in --help)", ErrConfig, where)
		}
		value, err := scalarValue(v)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrConfig, where, err)
		}
		if set[name] {
			continue // the command line or the environment said otherwise
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("%w: %s %q: %v", ErrConfig, where, value, flagerr.Explain(fs.Lookup(name), err))
		}
	}
	return nil
}

// scalarValue returns a scalar's text, or a list's items joined by commas.
func scalarValue(v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", errors.New("no value")
		}
		return v.Value, nil
	case yaml.SequenceNode:
		items := make([]string, 0, len(v.Content))
		for _, it := range v.Content {
			if it.Kind != yaml.ScalarNode || strings.Contains(it.Value, ",") {
				return "", errors.New("a list holds plain values without commas")
			}
			items = append(items, it.Value)
		}
		return strings.Join(items, ","), nil
	}
	return "", errors.New("want a value or a list of values")
}
