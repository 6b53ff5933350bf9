# Keeps the columns of an ncu --csv --page raw log that the notes use (kernel, grid, block, time).
import csv, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if not l.startswith('==')))
keep = [rows[0].index(c) for c in ('ID', 'Kernel Name', 'Grid Size', 'Block Size', 'gpu__time_duration.sum')]
w = csv.writer(open(sys.argv[2], 'w', newline=''))
for r in rows:
    w.writerow([r[i] for i in keep])
