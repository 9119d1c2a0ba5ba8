package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"tally/ledger"
)

func main() {
	n := flag.Int("n", 1_000_000, "votes in all")
	replicas := flag.Int("replicas", 3, "replicas")
	out := flag.String("out", "exports", "output directory")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	for r := range *replicas {
		name := fmt.Sprintf("r%d", r+1)
		dir, err := os.MkdirTemp("", "ledgergen")
		if err != nil {
			log.Fatal(err)
		}
		l, err := ledger.Open(ledger.Config{Dir: dir, Replica: name})
		if err != nil {
			log.Fatal(err)
		}
		batch := make([]ledger.Record, 0, 1000)
		for i := r; i < *n; i += *replicas {
			idem := fmt.Sprintf("k%d", i)
			if i%100 == 99 {
				idem = fmt.Sprintf("k%d", i-1) // a retry that reached another region
			}
			batch = append(batch, ledger.Record{
				Poll: "bench", Voter: fmt.Sprintf("v%d", i*2/3), Option: []string{"red", "green", "blue", "yellow"}[i%4],
				Idem: idem, Wall: int64(1_700_000_000_000 + i), Trust: 1, Counted: i%50 != 0, Late: i%200 == 0,
			})
			if len(batch) == cap(batch) || i+*replicas >= *n {
				if _, err := l.Append(batch...); err != nil {
					log.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		f, err := os.Create(filepath.Join(*out, name+".ndjson"))
		if err != nil {
			log.Fatal(err)
		}
		count, err := l.Export(f, "bench")
		if err != nil {
			log.Fatal(err)
		}
		f.Close()
		l.Close()
		os.RemoveAll(dir)
		fmt.Printf("%s: %d records\n", f.Name(), count)
	}
}
