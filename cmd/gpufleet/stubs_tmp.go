package main

import "github.com/spf13/cobra"

func newCatalogCmd() *cobra.Command { return &cobra.Command{Use: "catalog"} }
func newQuoteCmd() *cobra.Command   { return &cobra.Command{Use: "quote"} }
func newServeCmd() *cobra.Command   { return &cobra.Command{Use: "serve"} }
