"""The kit: what every track builds on; it names no track."""
