# A fixed perl workload for bench/run_all.sh: hash, array, string and sort churn (perl's own
# allocator is off in Debian's build, so every SV, hash entry and string is a malloc).
# Optional argument: a scale factor (default 1.0, about a second bare; run_all.sh uses 0.4).
use strict;
use warnings;

my $scale = shift // 1.0;
my $n = int(60000 * $scale) || 100;
my $total = 0;
for my $round (1 .. 3) {
  my %h;
  for my $i (1 .. $n) {
    my $k = sprintf("k%06d", $i + $round);
    $h{$k} = [$i, uc $k, { t => substr($k, 0, 3), n => $i % 7 }];
  }
  my @keys = sort keys %h;
  my $s = join(",", map { $h{$_}[1] } @keys);
  my %c;
  $c{ substr($_, 0, 4) }++ for split /,/, $s;
  $total += scalar(keys %c) + length($s);
}
print "$total\n";
