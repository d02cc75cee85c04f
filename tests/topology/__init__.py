"""Tests of one area: labkit.topology and labkit.widgets: graphs, pictures, widget logic."""
