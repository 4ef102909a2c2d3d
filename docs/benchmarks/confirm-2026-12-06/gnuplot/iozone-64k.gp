set terminal pngcairo size 1100,550 noenhanced font ',10'
set output '../iozone-64k.png'
set title 'iozone-64k (MB/s, higher is better; bars: median, whiskers: min-max)'
set ylabel 'MB/s'
set style data histogram
set style histogram errorbars gap 2 lw 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside right top
set grid ytics
set xtics nomirror
set logscale y
plot 'iozone-64k.dat' using 2:3:4:xtic(1) title 'sigilfs' lt 1, \
     'iozone-64k.dat' using 5:6:7 title 'sigilfs-uring' lt 3, \
     'iozone-64k.dat' using 8:9:10 title 'gocryptfs' lt 4, \
     'iozone-64k.dat' using 11:12:13 title 'securefs' lt 6
