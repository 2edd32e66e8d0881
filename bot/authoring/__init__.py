"""Tools for content authors that only the command line uses (`coursebot lint`): stamps, coverage, the proof."""
