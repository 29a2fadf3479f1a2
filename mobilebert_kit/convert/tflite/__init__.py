"""The ``.tflite`` format: conversion, graph passes, names and metadata, the writer."""
